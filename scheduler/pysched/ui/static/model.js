// The view model: the scenario (GET /api/scenario) overlaid with the displayed run (GET /api/runs/{id}):
// every node's utilisation after the run, every pod's state after it.

import { naturalCompare, pct } from './util.js';

export const POD_GROUP_LABELS = ['scheduling.x-k8s.io/pod-group', 'pod-group.scheduling.sigs.k8s.io'];
const INSTANCE_LABELS = ['node.kubernetes.io/instance-type', 'beta.kubernetes.io/instance-type'];
const CAPACITY_LABELS = ['karpenter.sh/capacity-type', 'eks.amazonaws.com/capacityType'];
const ZONE_LABELS = ['topology.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/zone'];
const BASE = ['cpu', 'memory', 'pods'];

const firstLabel = (labels, keys) => {
  for (const k of keys) if (labels && labels[k]) return labels[k];
  return '';
};

/** Max of the cpu and memory percentages, an integer 0..100 (the heatmap's colour). */
export function nodeUtil(requested, allocatable) {
  let m = 0;
  for (const r of ['cpu', 'memory']) {
    const p = pct(requested[r] || 0, allocatable[r] || 0);
    if (p !== null && p > m) m = p;
  }
  return Math.max(0, Math.min(100, Math.round(m)));
}

function sortResources(names) {
  const extra = names.filter((r) => !BASE.includes(r)).sort();
  return [...BASE.filter((r) => names.includes(r)), ...extra];
}

/** Requests summed per node from the scenario's bound pods (the state when no run covers a node). */
function scenarioRequested(pods) {
  const out = new Map();
  for (const p of pods) {
    if (!p.node || p.state !== 'bound') continue;
    let r = out.get(p.node);
    if (!r) { r = { pods: 0 }; out.set(p.node, r); }
    r.pods += 1;
    for (const [k, v] of Object.entries(p.requests || {})) if (k !== 'pods') r[k] = (r[k] || 0) + v;
  }
  return out;
}

/**
 * Build the view: nodes (with after/before utilisation), pods (with their state after the run),
 * resources and the cluster-wide summary.
 */
export function deriveView(scenario, run) {
  const sNodes = scenario ? scenario.nodes || [] : [];
  const sPods = scenario ? scenario.pods || [] : [];
  const fromScenario = scenarioRequested(sPods);

  const afterRows = new Map();
  const beforeRows = new Map();
  let resources = null;
  const util = run && run.utilisation;
  if (util && util.after && Array.isArray(util.after.nodes)) {
    for (const row of util.after.nodes) afterRows.set(row.node, row);
    resources = util.after.resources || null;
  }
  if (util && util.before && Array.isArray(util.before.nodes)) {
    for (const row of util.before.nodes) beforeRows.set(row.node, row);
  }
  if (!resources) {
    const names = new Set(['cpu', 'memory', 'pods']);
    for (const n of sNodes) for (const k of Object.keys(n.allocatable || {})) names.add(k);
    resources = [...names];
  }
  resources = sortResources(resources);

  const nodes = [];
  const nodeByName = new Map();
  for (const n of sNodes) {
    const row = afterRows.get(n.name);
    const req = row ? row.requested || {} : fromScenario.get(n.name) || {};
    const alloc = row ? { ...(n.allocatable || {}), ...(row.allocatable || {}) } : n.allocatable || {};
    const before = beforeRows.get(n.name);
    const node = {
      name: n.name,
      labels: n.labels || {},
      zone: n.zone ?? firstLabel(n.labels, ZONE_LABELS),
      instanceType: n.instanceType ?? firstLabel(n.labels, INSTANCE_LABELS),
      capacityType: n.capacityType ?? firstLabel(n.labels, CAPACITY_LABELS),
      taints: n.taints || [],
      allocatable: alloc,
      requested: req,
      beforeRequested: before ? before.requested || {} : req,
      inRun: !run || Boolean(row),
    };
    node.util = nodeUtil(node.requested, node.allocatable);
    node.utilBefore = nodeUtil(node.beforeRequested, node.allocatable);
    nodes.push(node);
    nodeByName.set(n.name, node);
  }
  // Nodes the run had that the scenario no longer has (deleted since) are not drawn: the heatmap
  // and the node list are the scenario's nodes; the utilisation summary is the run's, all of them.

  // Pods: the scenario's, overlaid with the run's placements and preemption victims.
  const placements = new Map();
  const victimOf = new Map();
  for (const p of (run && run.placements) || []) {
    placements.set(p.pod, p);
    for (const v of p.victims || []) victimOf.set(v, p.pod);
  }
  const pods = [];
  const podByKey = new Map();
  const podsOnNode = new Map();
  const addOn = (node, pod) => {
    if (!node || !nodeByName.has(node)) return;
    let l = podsOnNode.get(node);
    if (!l) { l = []; podsOnNode.set(node, l); }
    l.push(pod);
  };
  let pending = 0;   // left without a node by the run (preempted pods aside)
  const mk = (sp, key) => {
    const placement = placements.get(key) || null;
    const pod = {
      key,
      namespace: sp ? sp.namespace : key.split('/')[0],
      name: sp ? sp.name : key.slice(key.indexOf('/') + 1),
      requests: sp ? sp.requests || {} : {},
      priority: sp ? sp.priority ?? 0 : null,
      labels: sp ? sp.labels || {} : {},
      owner: sp ? sp.owner || null : null,
      podGroup: sp ? sp.podGroup || null : null,
      scenarioState: sp ? sp.state : null,
      scenarioNode: sp ? sp.node || null : null,
      placement,
      node: null,
      status: 'pending',
      message: '',
      preemptor: victimOf.get(key) || null,
    };
    if (placement) {
      pod.node = placement.node || null;
      pod.status = placement.node ? 'placed' : 'pending';
      pod.message = placement.message || '';
      if (!placement.node && placement.nominatedNode) pod.status = 'nominated';
    } else if (pod.preemptor) {
      pod.status = 'preempted';
      pod.message = `preempted by ${pod.preemptor}`;
    } else if (sp && sp.state === 'bound' && sp.node) {
      pod.node = sp.node;
      pod.status = 'bound';
    } else {
      pod.status = 'pending';
      pod.message = run ? 'not in the displayed run (added since)' : 'not scheduled yet: press Run';
    }
    if (!pod.node && pod.status !== 'preempted') pending += 1;
    return pod;
  };
  for (const sp of sPods) {
    const pod = mk(sp, sp.key);
    pods.push(pod);
    podByKey.set(pod.key, pod);
    addOn(pod.node, pod);
  }
  for (const key of placements.keys()) {
    if (podByKey.has(key)) continue;
    const pod = mk(null, key);
    pod.gone = true;
    pods.push(pod);
    podByKey.set(key, pod);
    addOn(pod.node, pod);
  }

  // What the run decided first: left pending, then placed by the run, then bound before it.
  const rank = { pending: 0, nominated: 0, preempted: 1, placed: 2, bound: 3 };
  pods.sort((a, b) => rank[a.status] - rank[b.status]);

  // Cluster-wide utilisation, after and before the run, over the nodes the run saw (or the scenario's).
  const summary = resources.map((r) => {
    let req = 0; let alloc = 0; let reqBefore = 0;
    if (afterRows.size) {
      for (const [name, row] of afterRows) {
        req += (row.requested || {})[r] || 0;
        alloc += (row.allocatable || {})[r] || 0;
        const before = beforeRows.get(name);
        reqBefore += before ? (before.requested || {})[r] || 0 : 0;
      }
    } else {
      for (const n of nodes) {
        req += n.requested[r] || 0;
        alloc += n.allocatable[r] || 0;
        reqBefore += n.beforeRequested[r] || 0;
      }
    }
    return { resource: r, requested: req, allocatable: alloc, requestedBefore: reqBefore };
  });

  return {
    resources, nodes, nodeByName, pods, podByKey, podsOnNode, summary,
    counts: { total: pods.length, pending, placed: pods.reduce((a, p) => a + (p.node ? 1 : 0), 0) },
  };
}

/** Groups of nodes for the heatmap: [[value, nodes]] in natural order, the empty value last. */
export function groupNodes(nodes, by) {
  const groups = new Map();
  for (const n of nodes) {
    const v = n[by] || '';
    let g = groups.get(v);
    if (!g) { g = []; groups.set(v, g); }
    g.push(n);
  }
  const keys = [...groups.keys()].sort((a, b) => (a === '' ? 1 : b === '' ? -1 : naturalCompare(a, b)));
  return keys.map((k) => [k, groups.get(k).sort((a, b) => naturalCompare(a.name, b.name))]);
}

export function podGroupOf(pod) {
  if (pod.podGroup) return pod.podGroup;   // spec.schedulingGroup: Kubernetes' own PodGroup
  for (const k of POD_GROUP_LABELS) if (pod.labels && pod.labels[k]) return `${pod.namespace}/${pod.labels[k]}`;
  const m = /PodGroup (\S+\/\S+)/.exec(pod.message || '');
  return m ? m[1] : null;
}
