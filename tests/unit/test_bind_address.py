"""Where the secure port listens (issue 56): a process run by hand answers on 127.0.0.1 only (a
laptop does not expose /metrics to its network); what runs pysched in a pod - manifests/, the
image's default command - passes ``--bind-address=0.0.0.0`` for the kubelet's probes and
Prometheus, which reach the pod IP. The chart's rendering is checked in tests/e2e/test_helm_chart.py
and kustomize's in tests/e2e/test_manifests_metrics.py."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import yaml

from pysched.cli import DEFAULT_BIND_ADDRESS, build_parser, parse_args

REPO = Path(__file__).resolve().parents[2]


def test_the_default_is_loopback():
    assert DEFAULT_BIND_ADDRESS == "127.0.0.1"
    assert parse_args(["--config", "c.yaml"]).bind_address == "127.0.0.1"      # `pysched` alone is `run`
    assert parse_args(["run"]).bind_address == "127.0.0.1"
    assert parse_args(["run", "--bind-address=0.0.0.0"]).bind_address == "0.0.0.0"
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flag = next(a for a in subparsers.choices["run"]._actions if "--bind-address" in a.option_strings)
    assert "default: 127.0.0.1" in flag.help and "0.0.0.0" in flag.help


def test_the_manifests_deployment_listens_on_the_pod_ip():
    dep = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
    (scheduler,) = dep["spec"]["template"]["spec"]["containers"]
    assert "--bind-address=0.0.0.0" in scheduler["args"]
    probes = [scheduler["livenessProbe"]["httpGet"]["port"], scheduler["readinessProbe"]["httpGet"]["port"]]
    assert f"--secure-port={probes[0]}" in scheduler["args"] and probes[0] == probes[1]


def test_the_image_default_command_listens_on_the_pod_ip():
    text = (REPO / "Dockerfile").read_text()
    last_stage = text[text.rindex("\nFROM "):]
    (cmd,) = re.findall(r"^CMD (\[.*\])$", last_stage, re.M)
    assert "--bind-address=0.0.0.0" in json.loads(cmd)
