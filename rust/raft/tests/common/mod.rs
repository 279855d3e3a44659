//! A tiny state machine for the tests: appends each command to a shared Vec; output = raft index.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubecore_raft::{Config, RaftError, RaftHandle, StateMachine};

#[derive(Clone, Default)]
pub struct VecSm {
    pub items: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Commands returned once by the next `on_tick`.
    pub tick_cmds: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl VecSm {
    pub fn items(&self) -> Vec<Vec<u8>> {
        self.items.lock().unwrap().clone()
    }
}

impl StateMachine for VecSm {
    type Output = u64;

    fn apply(&mut self, entries: &[(u64, &[u8])]) -> Vec<u64> {
        let mut items = self.items.lock().unwrap();
        entries
            .iter()
            .map(|(i, d)| {
                items.push(d.to_vec());
                *i
            })
            .collect()
    }

    fn snapshot(&mut self, w: &mut dyn Write) -> std::io::Result<()> {
        let items = self.items.lock().unwrap();
        w.write_all(&(items.len() as u64).to_le_bytes())?;
        for it in items.iter() {
            w.write_all(&(it.len() as u32).to_le_bytes())?;
            w.write_all(it)?;
        }
        Ok(())
    }

    fn restore(&mut self, r: &mut dyn Read) -> std::io::Result<()> {
        let mut n = [0u8; 8];
        r.read_exact(&mut n)?;
        let mut out = Vec::new();
        for _ in 0..u64::from_le_bytes(n) {
            let mut l = [0u8; 4];
            r.read_exact(&mut l)?;
            let mut it = vec![0u8; u32::from_le_bytes(l) as usize];
            r.read_exact(&mut it)?;
            out.push(it);
        }
        *self.items.lock().unwrap() = out;
        Ok(())
    }

    fn on_tick(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.tick_cmds.lock().unwrap())
    }
}

pub fn cfg(dir: &Path) -> Config {
    Config {
        dir: Some(dir.to_path_buf()),
        segment_bytes: 1 << 20,
        tick_interval: Duration::from_millis(20),
        ..Config::default()
    }
}

pub fn open(cfg: Config) -> (RaftHandle<VecSm>, VecSm) {
    let sm = VecSm::default();
    let h = RaftHandle::open(cfg, sm.clone()).expect("open");
    (h, sm)
}

/// Proposes and waits for the completion.
pub fn put(h: &RaftHandle<VecSm>, data: &[u8]) -> Result<u64, RaftError> {
    let (tx, rx) = mpsc::channel();
    h.propose(data.to_vec(), Box::new(move |r| tx.send(r).unwrap()));
    rx.recv().expect("completion called")
}

pub fn item(i: usize) -> Vec<u8> {
    format!("item-{i:05}").into_bytes()
}

/// WAL segments of `dir`, oldest first.
pub fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

/// Offset just past the last non-zero byte of a file (end of its written records).
pub fn data_end(path: &Path) -> usize {
    let b = std::fs::read(path).unwrap();
    b.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1)
}
