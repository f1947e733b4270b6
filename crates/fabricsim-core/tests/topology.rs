//! The topology generators and calculator, checked on the scenario files in
//! scenarios/topologies against the counts the papers give
//! (mrc-srv6-multiplane.txt s2; alibaba-hpn.txt s5-s6, Table 2) and against
//! the wiring rules of dual-ToR, dual-plane, multi-plane and rail-optimised
//! fabrics.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::OnceLock;

use fabricsim_core::error::ScenarioError;
use fabricsim_core::topology::{NodeId, NodeRole, Topology, TopologyReport, TopologySpec};
use fabricsim_core::units::Rate;
use serde::Deserialize;

/// The part of a scenario file the calculator reads.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    topology: TopologySpec,
}

fn scenario_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/topologies")
}

fn load(name: &str) -> TopologySpec {
    let path = scenario_dir().join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let scenario: Scenario = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(scenario.name, name, "the name in {} should match the file", path.display());
    scenario.topology
}

struct Built {
    topo: Topology,
    report: TopologyReport,
}

fn build(name: &str) -> Built {
    let topo = load(name).build().unwrap_or_else(|e| panic!("{name}: {e}"));
    let report = topo.report();
    Built { topo, report }
}

/// The two large fabrics are shared by the tests that compare them.
fn clos3_800g() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| build("clos3_800g_64port"))
}

fn multiplane_8x100g() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| build("multiplane_8x100g_512port"))
}

fn build_error(yaml: &str) -> ScenarioError {
    let spec: TopologySpec = serde_yaml_ng::from_str(yaml).unwrap();
    spec.build().unwrap_err()
}

fn switch_role(topo: &Topology, id: NodeId) -> (u8, u16, u32) {
    match topo.node(id).role {
        NodeRole::Switch { tier, plane, pod } => (tier, plane, pod),
        NodeRole::Nic { .. } => panic!("{} is a NIC", topo.name(id)),
    }
}

/// For every NIC, the ToR behind each of its ports, in port order.
fn nic_tors(topo: &Topology) -> Vec<Vec<NodeId>> {
    let adjacency = topo.adjacency();
    topo.nics().into_iter().map(|nic| adjacency[nic.0 as usize].iter().map(|&l| topo.peer(l, nic)).collect()).collect()
}

fn host_rail(topo: &Topology, nic: usize) -> (u32, u16) {
    match topo.nodes[nic].role {
        NodeRole::Nic { host, rail } => (host, rail),
        NodeRole::Switch { .. } => unreachable!(),
    }
}

#[test]
fn every_scenario_file_builds() {
    let mut count = 0;
    for entry in std::fs::read_dir(scenario_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let name = path.file_stem().unwrap().to_str().unwrap();
            let report = build(name).report;
            assert!(report.nics > 0 && report.bisection_bps > 0, "{name}: {report:?}");
            count += 1;
        }
    }
    assert!(count >= 9, "found only {count} scenario files");
}

#[test]
fn three_tier_800g_holds_64k_nics() {
    let r = &clos3_800g().report;
    assert_eq!(r.nics, 65_536);
    assert_eq!(r.switches_per_tier, [2048, 2048, 1024]);
    assert_eq!(r.switches_total, 5120);
    assert_eq!(r.links_total, 3 * 65_536);
    // One module in the NIC and one at each end of three link layers.
    assert_eq!(r.transceivers, 6 * 65_536);
    assert_eq!(r.bisection_bps, 65_536 * 800_000_000_000 / 2);
}

#[test]
fn multiplane_8x100g_holds_128k_nics() {
    let r = &multiplane_8x100g().report;
    assert_eq!(r.nics, 131_072);
    assert_eq!(r.nic_ports, 8 * 131_072);
    assert_eq!(r.switches_per_tier, [8 * 512, 8 * 256]);
    assert_eq!(r.switches_total, 6144);
    // One NIC module (8 x 100G in one cage) and three 100G lanes of 800G
    // modules per NIC port: 1 + 8 * 3 / 8.
    assert_eq!(r.transceivers, 4 * 131_072);
}

/// mrc-srv6-multiplane.txt s2: "for full bisection bandwidth we require 2/3
/// of the optics and 3/5 the number of switches compared to a 3-tier
/// network".
#[test]
fn multiplane_needs_two_thirds_of_the_optics_and_three_fifths_of_the_switches() {
    let (multi, clos3) = (&multiplane_8x100g().report, &clos3_800g().report);
    // Compare per-NIC ratios exactly: a/b == p/q  <=>  a*q == b*p.
    let per_nic = |m: u64, c: u64| (m as u128 * clos3.nics as u128, c as u128 * multi.nics as u128);
    let (m, c) = per_nic(multi.switches_total, clos3.switches_total);
    assert_eq!(5 * m, 3 * c, "switches per NIC");
    let (m, c) = per_nic(multi.transceivers, clos3.transceivers);
    assert_eq!(3 * m, 2 * c, "transceivers per NIC");
    // Both are non-blocking: the same bisection per NIC.
    assert_eq!(multi.bisection_bps / multi.nics, clos3.bisection_bps / clos3.nics);
}

#[test]
fn multiplane_planes_share_no_switch() {
    let topo = &multiplane_8x100g().topo;
    for link in &topo.links {
        if !topo.is_nic(link.a) {
            assert_eq!(switch_role(topo, link.a).1, switch_role(topo, link.b).1, "link crosses planes");
        }
    }
    // NIC port p lands in plane p.
    for (nic, tors) in nic_tors(topo).iter().enumerate() {
        let planes: Vec<u16> = tors.iter().map(|&t| switch_role(topo, t).1).collect();
        assert_eq!(planes, (0..8).collect::<Vec<u16>>(), "nic{nic}");
    }
}

#[test]
fn fat_tree_k16_counts() {
    let r = build("fat_tree_k16").report;
    assert_eq!(r.nics, 1024);
    assert_eq!(r.switches_total, 320);
    assert_eq!(r.switches_per_tier, [128, 128, 64]);
    assert_eq!(r.links_total, 3072);
    assert_eq!(r.bisection_bps, 1024 * Rate::from_gbps(100).0 / 2);
}

#[test]
fn hpn_segment_is_1024_gpus_on_16_tors() {
    let Built { topo, report } = build("hpn_segment");
    assert_eq!(report.nics, 1024);
    assert_eq!(report.switches_per_tier, [16, 120]);
    let hosts: HashSet<u32> =
        (0..topo.nodes.len()).filter(|&n| topo.is_nic(NodeId(n as u32))).map(|n| host_rail(&topo, n).0).collect();
    assert_eq!(hosts.len(), 128);
    // Each ToR serves 128 GPUs with its 128 active down ports.
    let mut per_tor: HashMap<NodeId, usize> = HashMap::new();
    for tor in nic_tors(&topo).into_iter().flatten() {
        *per_tor.entry(tor).or_default() += 1;
    }
    assert_eq!(per_tor.len(), 16);
    assert!(per_tor.values().all(|&n| n == 128));
}

#[test]
fn hpn_pod_is_15_segments_of_1024_gpus() {
    let Built { topo, report } = build("hpn_pod");
    assert_eq!(report.nics, 15_360);
    assert_eq!(report.nic_ports, 2 * 15_360);
    // 120 ToRs and 60 aggregation switches in each of the two planes.
    assert_eq!(report.switches_per_tier, [240, 120]);
    let segments: HashSet<u32> = topo
        .nodes
        .iter()
        .filter_map(|n| match n.role {
            NodeRole::Switch { tier: 0, pod, .. } => Some(pod),
            _ => None,
        })
        .collect();
    assert_eq!(segments.len(), 15);
    // ToR: 128 x 200G down against 60 x 400G up, the 1.067:1 of s5.1.
    assert_eq!(report.bisection_bps, 240 * 60 * Rate::from_gbps(400).0 / 2);
}

#[test]
fn hpn_cluster_joins_8_pods_through_a_15_to_1_core_in_two_planes() {
    // alibaba-hpn.txt s6.2, s7: 8 pods of 15,360 GPUs.
    let Built { topo, report } = build("hpn_cluster");
    assert_eq!(report.nics, 8 * 15_360);
    assert_eq!(report.switches_per_tier, [1920, 960, 960]);
    // The aggregation layer's 120 x 400G down against 8 x 400G up: 15:1.
    let pod_bisection = 960u64 * 8 * Rate::from_gbps(400).0 / 2;
    assert_eq!(report.bisection_bps, pod_bisection);
    // The dual plane is carried on into the core: no link joins two planes.
    let plane = |n: NodeId| match topo.node(n).role {
        NodeRole::Switch { plane, .. } => Some(plane),
        NodeRole::Nic { .. } => None,
    };
    for link in &topo.links {
        if let (Some(a), Some(b)) = (plane(link.a), plane(link.b)) {
            assert_eq!(a, b, "{} - {}", topo.name(link.a), topo.name(link.b));
        }
    }
}

#[test]
fn dcn_plus_is_32_pods_of_4_segments_of_128_gpus() {
    // alibaba-hpn.txt Appendix C.
    let Built { topo, report } = build("dcn_plus");
    assert_eq!(report.nics, 16_384);
    assert_eq!(report.switches_per_tier, [256, 256, 64]);
    // A segment: both ports of 128 NICs on one ToR pair.
    let tors = nic_tors(&topo);
    let mut segment: HashMap<Vec<NodeId>, u32> = HashMap::new();
    for pair in &tors {
        assert_eq!(pair.len(), 2);
        *segment.entry(pair.clone()).or_default() += 1;
    }
    assert!(segment.values().all(|&n| n == 128), "{:?}", segment.values().collect::<HashSet<_>>());
    // A pod: 8 ToRs (4 segments) under 8 aggregation switches.
    let mut per_pod: HashMap<u32, (u32, u32)> = HashMap::new();
    for node in &topo.nodes {
        if let NodeRole::Switch { tier, pod, .. } = node.role {
            let entry = per_pod.entry(pod).or_default();
            match tier {
                0 => entry.0 += 1,
                1 => entry.1 += 1,
                _ => {}
            }
        }
    }
    assert_eq!(per_pod.values().filter(|&&(t, a)| (t, a) == (8, 8)).count(), 32, "{per_pod:?}");
    // Full bisection bandwidth.
    assert_eq!(report.bisection_bps, 16_384 * 2 * Rate::from_gbps(200).0 / 2);
}

/// alibaba-hpn.txt s6.1: traffic from port 0 of a NIC stays in plane 0.
#[test]
fn hpn_dual_plane_port0_tor_reaches_only_plane0_aggregation() {
    let Built { topo, .. } = build("hpn_pod");
    let adjacency = topo.adjacency();
    for tors in nic_tors(&topo) {
        for (port, &tor) in tors.iter().enumerate() {
            assert_eq!(switch_role(&topo, tor), (0, port as u16, switch_role(&topo, tor).2));
            for &link in &adjacency[tor.0 as usize] {
                let peer = topo.peer(link, tor);
                if !topo.is_nic(peer) {
                    assert_eq!(switch_role(&topo, peer).0, 1);
                    assert_eq!(switch_role(&topo, peer).1, port as u16, "{} reaches another plane", topo.name(tor));
                }
            }
        }
    }
}

/// alibaba-hpn.txt s5.2: NICs of one rail in a segment share their ToRs;
/// different rails use different ToRs.
#[test]
fn rail_optimized_nics_of_a_rail_share_a_tor_in_each_segment() {
    for (name, hosts_per_segment) in [("hpn_pod", 128), ("rail_optimized_small", 4)] {
        let Built { topo, .. } = build(name);
        let mut tors_of: HashMap<(u32, u16), HashSet<Vec<NodeId>>> = HashMap::new();
        for (nic, tors) in nic_tors(&topo).into_iter().enumerate() {
            let (host, rail) = host_rail(&topo, nic);
            tors_of.entry((host / hosts_per_segment, rail)).or_default().insert(tors);
        }
        assert!(tors_of.values().all(|tors| tors.len() == 1), "{name}: a rail of a segment spans several ToRs");
        let distinct: HashSet<&Vec<NodeId>> = tors_of.values().flatten().collect();
        assert_eq!(distinct.len(), tors_of.len(), "{name}: two rails or segments share a ToR");
    }
}

/// alibaba-hpn.txt s4: the two ports of a NIC go to two different ToRs.
#[test]
fn dual_tor_ports_attach_to_two_different_tors() {
    for (name, nics) in [("dual_tor_small", 16), ("hpn_dual_tor_single_plane", 4096)] {
        let Built { topo, report } = build(name);
        assert_eq!(report.nics, nics, "{name}");
        let mut nics_of: HashMap<NodeId, Vec<usize>> = HashMap::new();
        for (nic, tors) in nic_tors(&topo).into_iter().enumerate() {
            assert_eq!(tors.len(), 2);
            assert_ne!(tors[0], tors[1], "{name}: nic{nic} has both ports on one ToR");
            assert!(tors.iter().all(|&t| switch_role(&topo, t).0 == 0));
            for tor in tors {
                nics_of.entry(tor).or_default().push(nic);
            }
        }
        // The two ToRs of a set serve the same NICs.
        for tors in nic_tors(&topo) {
            assert_eq!(nics_of[&tors[0]], nics_of[&tors[1]], "{name}");
        }
    }
}

/// Table 2's dual-ToR row: a ToR set serves 128 NICs and a pod 4K.
#[test]
fn hpn_dual_tor_single_plane_matches_table_2() {
    let r = build("hpn_dual_tor_single_plane").report;
    assert_eq!(r.nics, 4096);
    assert_eq!(r.switches_per_tier, [64, 60]);
}

#[test]
fn explicit_small_keeps_names_and_counts() {
    let Built { topo, report } = build("explicit_small");
    assert_eq!(topo.name(NodeId(2)), "gpu0");
    assert_eq!(topo.find("tor1"), Some(NodeId(1)));
    assert_eq!((report.nics, report.switches_total, report.links_total), (4, 2, 5));
    assert_eq!(report.bisection_bps, Rate::from_gbps(200).0);
    // Four NIC modules; each ToR's physical ports run at its fastest link,
    // 200G: one for the two 100G NIC links as lanes, one for the 200G link.
    assert_eq!(report.transceivers, 4 + 2 * (1 + 1));
}

#[test]
fn explicit_errors_name_the_field() {
    let nodes = "kind: explicit\nnodes:\n  - {name: sw1, kind: switch}\n  - {name: nic0, kind: nic}\n";
    let err = build_error(&format!(
        "{nodes}links:\n  - {{a: nic0, b: sw1, rate: 100Gbps}}\n  - {{a: nic0, b: sw9, rate: 100Gbps}}\n"
    ));
    assert_eq!(err.to_string(), "topology.links[1].b: no node named 'sw9'");

    let err = build_error(&format!("{nodes}  - {{name: sw1, kind: switch}}\nlinks: []\n"));
    assert_eq!(err.field, "topology.nodes[2].name");
    assert!(err.message.contains("'sw1'"), "{err}");

    let err = build_error(&format!("{nodes}links:\n  - {{a: sw1, b: sw1, rate: 100Gbps}}\n"));
    assert_eq!(err.to_string(), "topology.links[0]: 'sw1' is linked to itself");
}

#[test]
fn impossible_clos_errors_name_the_field() {
    let err = build_error("{kind: clos, tiers: 3, radix: 7, link_rate: 100Gbps}");
    assert_eq!(err.field, "topology.radix");
    assert!(err.message.contains('7'), "{err}");

    let err = build_error("{kind: clos, tiers: 4, radix: 8, link_rate: 100Gbps}");
    assert_eq!(err.field, "topology.tiers");

    let err = build_error("{kind: clos, tiers: 2, radix: 8, link_rate: 100Gbps, planes: 2, nic_ports: 3}");
    assert_eq!(err.field, "topology.nic_ports");

    let err = build_error("{kind: clos, tiers: 2, radix: 8, link_rate: 100Gbps, nics: 100}");
    assert_eq!(err.to_string(), "topology.nics: 100 NICs do not fit: this Clos holds at most 32");

    let err = build_error("{kind: clos, tiers: 2, radix: 8, link_rate: [100Gbps, 400Gbps, 400Gbps]}");
    assert_eq!(err.field, "topology.link_rate");
}

#[test]
fn misspelt_fields_are_rejected_when_parsing() {
    let err = serde_yaml_ng::from_str::<TopologySpec>("{kind: clos, tiers: 2, radixx: 8, link_rate: 100Gbps}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("radixx"), "{err}");
}

#[test]
fn path_space_is_the_tor_uplinks_under_dual_plane_and_a_product_of_tiers_otherwise() {
    // alibaba-hpn.txt Table 1: in HPN's pod only the ToR chooses (60 uplinks).
    let space = |name: &str| build(name).report.path_space.unwrap_or_else(|| panic!("{name}: no path space"));
    let hpn = space("hpn_pod");
    assert_eq!((hpn.paths, hpn.hops), (60, 3), "{hpn:?}");
    assert_eq!(hpn.fanout, vec![60, 1, 1]);
    // Dual-ToR in one plane: the aggregation switch also picks one of the
    // destination's two ToRs.
    let plain = space("hpn_dual_tor_single_plane");
    assert_eq!((plain.paths, plain.fanout.clone()), (120, vec![60, 2, 1]), "{plain:?}");
    // A k = 16 fat tree, pod to pod: edge (8 up) x aggregation (8 up).
    let fat = space("fat_tree_k16");
    assert_eq!((fat.paths, fat.fanout.clone()), (64, vec![8, 8, 1, 1, 1]), "{fat:?}");
    assert_eq!(fat.to, "nic64", "the first NIC of the next pod");
}
