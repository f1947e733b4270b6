//! Static SRv6 micro-SID routing: packets follow exactly the switches their
//! uSIDs name, and a failed switch on a path loses its packets because
//! static routes never change.

mod common;

use common::{ints, run, summary_u64, texts};
use fabricsim_core::net::PortId;
use fabricsim_core::switch::Srv6;
use fabricsim_core::topology::TopologySpec;
use serde_json::{json, Value};

fn topology() -> Value {
    json!({"kind": "clos", "tiers": 3, "radix": 4, "link_rate": "100Gbps"})
}

/// The simulator's port numbering: link l has port 2l at its lower end.
fn node_ports(topo: &fabricsim_core::topology::Topology) -> Vec<Vec<PortId>> {
    topo.adjacency()
        .iter()
        .enumerate()
        .map(|(n, links)| {
            links.iter().map(|l| PortId(2 * l.0 + u32::from(topo.links[l.0 as usize].a.0 as usize != n))).collect()
        })
        .collect()
}

#[test]
fn a_flow_visits_exactly_the_switches_its_usids_name() {
    let spec: TopologySpec = serde_json::from_value(topology()).unwrap();
    let topo = spec.build().unwrap();
    let ports = node_ports(&topo);
    let port_node = |p: PortId| {
        let link = topo.links[(p.0 / 2) as usize];
        if p.0.is_multiple_of(2) {
            link.a
        } else {
            link.b
        }
    };
    let srv6 = Srv6::build(&topo, &ports, port_node).unwrap();
    // nic0 (pod 0) to nic15 (another pod): T0, T1, T2, T1, T0, downlink.
    let (src, dst) = (topo.find("nic0").unwrap(), topo.find("nic15").unwrap());
    let out = run(json!({
        "topology": topology(),
        "switch": {"forwarding": "srv6"},
        "traffic": [{"kind": "flow", "src": "nic0", "dst": "nic15", "bytes": "1MB"}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 1);
    let ev = ints(&out.flows, "entropy")[0] as u16;
    let path = srv6.path(ports[src.0 as usize][0], ports[dst.0 as usize][0], ev).unwrap();
    assert_eq!(path.len, 6);
    let named: Vec<u16> = path.usids[..5].to_vec();
    // Every switch port that forwarded the flow's data belongs to a switch
    // the path names, and every named switch forwarded it.
    let (node, tx) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    let busy: std::collections::BTreeSet<u16> = (0..node.len())
        .filter(|&i| tx[i] > 500_000 && !node[i].starts_with("nic"))
        .map(|i| srv6.usid(topo.find(&node[i]).unwrap()))
        .collect();
    assert_eq!(busy, named.iter().copied().collect(), "path {:x?}", path.usids);
    // The destination address after each shift is the hand-computed one.
    assert_eq!(path.address(2) >> 96, 0x2001_0db8);
    assert_eq!((path.address(2) >> 80) & 0xFFFF, named[2] as u128);
}

#[test]
fn a_failed_switch_on_a_static_path_is_not_routed_around() {
    let two_tier = json!({"kind": "clos", "tiers": 2, "radix": 4, "link_rate": "100Gbps"});
    let flow = json!([{"kind": "flow", "src": 0, "dst": 2, "bytes": "2MB"}]);
    // Which spine does the flow's EV name? Run it once on a healthy fabric.
    let healthy = run(json!({"topology": two_tier, "switch": {"forwarding": "srv6"}, "traffic": flow}));
    let (node, peer, tx) =
        (texts(&healthy.ports, "node"), texts(&healthy.ports, "peer"), ints(&healthy.ports, "tx_bytes"));
    let spine = (0..node.len())
        .find(|&i| node[i] == "t0.p0.0" && peer[i].starts_with("t1.") && tx[i] > 1_000_000)
        .map(|i| peer[i].split(':').next().unwrap().to_string())
        .expect("the flow crosses a spine");
    let failing = |forwarding: &str| {
        run(json!({
            "topology": two_tier,
            "switch": {"forwarding": forwarding, "reconvergence_delay": "20us"},
            "transport": {"kind": "rocev2", "timeout_exponent": 2, "retry_count": 3},
            "traffic": flow,
            "faults": [{"kind": "switch_down", "at": "10us", "switch": spine}],
        }))
    };
    // ECMP reconverges onto the other spine and the flow completes...
    let ecmp = failing("ecmp");
    assert_eq!(summary_u64(&ecmp, "flows_completed"), 1, "{}", ecmp.summary);
    // ...the static SRv6 route keeps naming the dead spine: every
    // retransmission is lost there until the QP gives up.
    let srv6 = failing("srv6");
    assert_eq!(summary_u64(&srv6, "flows_completed"), 0);
    assert_eq!(summary_u64(&srv6, "qp_errors"), 1);
    assert!(srv6.summary["drops_by_cause"]["switch_down"].as_u64().unwrap() > 0);
}

#[test]
fn each_plane_routes_its_own_packets() {
    let out = run(json!({
        "topology": {"kind": "clos", "tiers": 2, "radix": 8, "link_rate": "100Gbps", "planes": 4},
        "switch": {"forwarding": "srv6"},
        "traffic": [{"kind": "permutation", "bytes": "1MB", "qps": 8}],
    }));
    assert_eq!(summary_u64(&out, "flows_completed"), 32);
    assert_eq!(out.summary["drops"], 0);
    let (node, tx) = (texts(&out.ports, "node"), ints(&out.ports, "tx_bytes"));
    for plane in 0..4 {
        let spines: u64 =
            (0..node.len()).filter(|&i| node[i].starts_with(&format!("t1.p{plane}."))).map(|i| tx[i]).sum();
        assert!(spines > 1_000_000, "plane {plane} carried {spines} bytes through its spines");
    }
}
