//! Host ports (`HostPortInfo`): the NodePorts filter's data.
//!
//! A pod uses the host ports of its containers and of its sidecars (restartable init
//! containers). An empty host IP means 0.0.0.0 and an empty protocol TCP. A wanted port
//! conflicts with a used one of the same protocol and number when either side binds 0.0.0.0 or
//! both bind the same IP. Unlike upstream's set, a node counts each use, so removing one of two
//! pods that (forced past the filter) share a port leaves the port used.

use crate::api::PodSpec;

pub const BIND_ALL: &str = "0.0.0.0";

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    pub fn new(ip: &str, protocol: &str, port: i32) -> HostPort {
        HostPort {
            ip: if ip.is_empty() { BIND_ALL } else { ip }.to_string(),
            protocol: if protocol.is_empty() { "TCP" } else { protocol }.to_string(),
            port,
        }
    }

    fn conflicts_with(&self, used: &HostPort) -> bool {
        self.port == used.port
            && self.protocol == used.protocol
            && (self.ip == BIND_ALL || used.ip == BIND_ALL || self.ip == used.ip)
    }
}

/// `GetHostPorts`: the host ports (> 0) of sidecars, then of containers.
pub fn pod_host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
    sidecars
        .chain(spec.containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| {
            HostPort::new(
                p.host_ip.as_deref().unwrap_or_default(),
                p.protocol.as_deref().unwrap_or_default(),
                p.host_port.unwrap_or(0),
            )
        })
        .collect()
}

/// The host ports in use on one node, with how many pods use each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsedPorts(Vec<(HostPort, u32)>);

impl UsedPorts {
    /// Counts a use of each port; a port number <= 0 is no host port and is left out
    /// (`HostPortInfo.Add`).
    pub fn add(&mut self, ports: &[HostPort]) {
        for p in ports.iter().filter(|p| p.port > 0) {
            match self.0.iter_mut().find(|(q, _)| q == p) {
                Some((_, n)) => *n += 1,
                None => self.0.push((p.clone(), 1)),
            }
        }
    }

    pub fn remove(&mut self, ports: &[HostPort]) {
        for p in ports {
            if let Some(i) = self.0.iter().position(|(q, _)| q == p) {
                self.0[i].1 -= 1;
                if self.0[i].1 == 0 {
                    self.0.swap_remove(i);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many distinct (ip, protocol, port) are in use (`HostPortInfo.Len`).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether any of `wanted` conflicts with a port in use, not counting the uses in `ignored`
    /// (the ports of pods a preemption dry run takes away). A wanted port number <= 0 conflicts
    /// with nothing (`HostPortInfo.CheckConflict`).
    pub fn conflicts(&self, wanted: &[HostPort], ignored: &[HostPort]) -> bool {
        wanted.iter().filter(|w| w.port > 0).any(|w| {
            self.0.iter().any(|(used, n)| {
                let gone = ignored.iter().filter(|&i| i == used).count() as u32;
                *n > gone && w.conflicts_with(used)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(ports: &[(&str, &str, i32)]) -> UsedPorts {
        let mut u = UsedPorts::default();
        u.add(&ports.iter().map(|&(ip, pr, p)| HostPort::new(ip, pr, p)).collect::<Vec<_>>());
        u
    }

    #[test]
    fn conflicts_follow_host_port_info() {
        let w = |ip, pr, p| vec![HostPort::new(ip, pr, p)];
        let u = used(&[("127.0.0.1", "TCP", 8080)]);
        assert!(u.conflicts(&w("127.0.0.1", "TCP", 8080), &[]));
        assert!(u.conflicts(&w("", "", 8080), &[]), "0.0.0.0 wanted conflicts with any IP");
        assert!(!u.conflicts(&w("127.0.0.2", "TCP", 8080), &[]));
        assert!(!u.conflicts(&w("127.0.0.1", "UDP", 8080), &[]));
        assert!(!u.conflicts(&w("127.0.0.1", "TCP", 8081), &[]));
        let all = used(&[("", "", 80)]);
        assert!(all.conflicts(&w("10.0.0.1", "TCP", 80), &[]), "used 0.0.0.0 conflicts with any IP");
        assert!(!all.conflicts(&w("10.0.0.1", "UDP", 80), &[]));
    }

    #[test]
    fn uses_are_counted() {
        let mut u = used(&[("", "TCP", 80), ("", "TCP", 80)]);
        let p = vec![HostPort::new("", "", 80)];
        assert!(u.conflicts(&p, &p[..1]), "one of two uses ignored");
        u.remove(&p);
        assert!(u.conflicts(&p, &[]));
        u.remove(&p);
        assert!(u.is_empty());
    }
}
