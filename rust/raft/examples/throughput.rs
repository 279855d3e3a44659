//! Quick durable-proposal throughput check (not a test):
//! `cargo run --release -p kubecore-raft --example throughput [-- DIR]`.
//! Prints one JSON line per scenario: writers, proposals, seconds, rate, fsyncs.

use std::sync::mpsc;
use std::time::Instant;

use kubecore_raft::{Config, RaftHandle, StateMachine};

struct Nop(u64);

impl StateMachine for Nop {
    type Output = u64;
    fn apply(&mut self, entries: &[(u64, &[u8])]) -> Vec<u64> {
        entries.iter().map(|(i, d)| {
            self.0 += d.len() as u64;
            *i
        }).collect()
    }
    fn snapshot(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(&self.0.to_le_bytes())
    }
    fn restore(&mut self, r: &mut dyn std::io::Read) -> std::io::Result<()> {
        let mut b = [0u8; 8];
        r.read_exact(&mut b)?;
        self.0 = u64::from_le_bytes(b);
        Ok(())
    }
}

fn run(h: &RaftHandle<Nop>, writers: usize, per_writer: usize) {
    let before = h.stats();
    let t0 = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|_| {
            let h = h.clone();
            std::thread::spawn(move || {
                let (tx, rx) = mpsc::channel();
                for _ in 0..per_writer {
                    let tx = tx.clone();
                    h.propose(vec![b'v'; 256], Box::new(move |r| tx.send(r.is_ok()).unwrap()));
                    assert!(rx.recv().unwrap());
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let secs = t0.elapsed().as_secs_f64();
    let after = h.stats();
    let n = writers * per_writer;
    println!(
        "{{\"writers\": {writers}, \"proposals\": {n}, \"seconds\": {secs:.3}, \"rate\": {:.0}, \"fsyncs\": {}, \"entries_per_fsync\": {:.1}}}",
        n as f64 / secs,
        after.fsyncs - before.fsyncs,
        n as f64 / (after.fsyncs - before.fsyncs).max(1) as f64
    );
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::args().nth(1).map(Into::into).unwrap_or_else(|| tmp.path().to_path_buf());
    let h = RaftHandle::open(Config { dir: Some(dir), ..Config::default() }, Nop(0)).unwrap();
    run(&h, 1, 5_000);
    run(&h, 16, 1_000);
    run(&h, 64, 500);
    run(&h, 256, 200);
    h.close().unwrap();
    for (label, cfg) in [
        ("memory", Config::default()),
        ("nofsync", Config { dir: Some(tmp.path().join("nofsync")), fsync: false, ..Config::default() }),
    ] {
        println!("{{\"mode\": \"{label}\"}}");
        let h = RaftHandle::open(cfg, Nop(0)).unwrap();
        run(&h, 1, 20_000);
        run(&h, 64, 1_000);
        h.close().unwrap();
    }
    let t0 = Instant::now();
    let h = RaftHandle::open(Config { dir: Some(tmp.path().to_path_buf()), ..Config::default() }, Nop(0)).unwrap();
    println!("{{\"reopen_seconds\": {:.3}, \"applied\": {}}}", t0.elapsed().as_secs_f64(), h.stats().applied_index);
    h.close().unwrap();
}
