"""``pysched [run]``: the scheduler process, from the parsed command line.

The configuration is checked first (every profile built once: a bad plugin or argument exits 2
before any API call), the informers' first LISTs are sent while the rest of the scheduler is
imported (``client.prefetch``), then ``SchedulerApp`` runs until it stops (``pysched.cli`` lists
the exit codes). ``--write-config-to`` writes the effective configuration instead and exits.
"""

from __future__ import annotations

import sys

import yaml

from pysched import __version__
from pysched.apis import config as configmod
from pysched.cli import auth_options
from pysched.util import eventloop


def load_config(path: str | None) -> configmod.SchedulerConfig:
    if path:
        return configmod.load_file(path)
    return configmod.default_config()


def _plugin_config_order(fw) -> list[str]:
    """The plugins whose args are written, in kube-scheduler's order (``setDefaults_KubeSchedulerProfile``):
    the profile's own ``pluginConfig`` entries as given, then the defaulted ones sorted by name."""
    with_args = {n for n, a in fw.plugin_args.items() if a is not None}
    given = [n for n in fw.profile.plugin_config if n in with_args]
    return given + sorted(with_args - set(given))


def run(args) -> int:
    """``pysched [run]``: check the configuration, then run the scheduler until it stops; its exit code."""
    from pysched.util import gctune
    gctune.configure()
    from pysched.client.auth import CredentialsError, load
    from pysched.runtime.registry import RegistryError

    try:
        cfg = load_config(args.config)
        kubeconfig = args.kubeconfig or cfg.client_connection.kubeconfig or None
        prefetch = creds = None
        if not args.write_config_to:
            # The informers' first LISTs go out now, while the rest of the scheduler is imported
            # and built (``client.prefetch``): the API server encodes them meanwhile.
            from pysched.client.prefetch import INFORMER_LISTS, ListPrefetch
            try:
                creds = load(kubeconfig)
                prefetch = ListPrefetch(creds, INFORMER_LISTS, user_agent=f"pysched/{__version__}").start()
            except (CredentialsError, ValueError, OSError):
                creds = prefetch = None   # reported below, once the configuration has been checked
        from pysched.app import Options, SchedulerApp
        from pysched.backend.cache.cache import SchedulerCache
        from pysched.framework.args import dump_args
        from pysched.framework.features import parse_feature_gates
        from pysched.profile import build_frameworks, default_registry
        registry = default_registry(args.plugin_module)
        feature_gates = parse_feature_gates(args.feature_gates)
        # Build every profile once before the scheduler starts: bad plugins/args fail here (with
        # the feature gates the scheduler will run with: some args are allowed only under a gate).
        fws = build_frameworks(cfg, registry, cache=SchedulerCache(), client=None, recorder=None,
                               feature_gates=feature_gates)
        if args.write_config_to:
            args_out = {name: {pn: dump_args(fw.plugin_args[pn]) for pn in _plugin_config_order(fw)}
                        for name, fw in fws.items()}
            eff = {name: fw.plugin_sets for name, fw in fws.items()}
            text = yaml.safe_dump(configmod.to_dict(cfg, args_out, eff), sort_keys=False)
            if args.write_config_to == "-":
                sys.stdout.write(text)
            else:
                with open(args.write_config_to, "w") as f:
                    f.write(text)
            return 0
        options = Options(kubeconfig=kubeconfig,
                          plugin_modules=args.plugin_module, resync_period=args.resync_period, seed=args.seed,
                          pod_recovery_interval=args.pod_recovery_interval,
                          feature_gates=feature_gates,
                          leader_elect=args.leader_elect, secure_port=args.secure_port,
                          bind_address=args.bind_address, cert_dir=args.cert_dir, serve=not args.no_serve,
                          tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
                          identity=args.identity, event_backlog_limit=args.event_backlog_limit,
                          explain_all=args.explain_all, shadow=args.shadow,
                          shadow_scheduler_names=args.shadow_scheduler_name or ["default-scheduler"],
                          podgroup_controller=args.podgroup_controller,
                          elasticquota_controller=args.elasticquota_controller, auth=auth_options(args))
        if options.serve:
            options.auth.validate()
        if creds is None:
            creds = load(options.kubeconfig)
        app = SchedulerApp(cfg, options, creds, registry, prefetch=prefetch)
    except (configmod.ConfigError, RegistryError) as exc:
        print(f"pysched: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except (CredentialsError, ValueError) as exc:
        print(f"pysched: {exc}", file=sys.stderr)
        return 2
    return eventloop.run(app.run())
