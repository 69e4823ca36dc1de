//! The simplest store a caller of the incremental orders could have,
//! for their tests: adjacency lists both ways.

use super::topo_order::Digraph;

/// Adjacency lists both ways, the simplest store a caller could have.
#[derive(Default)]
pub struct Graph {
    out: Vec<Vec<u32>>,
    inn: Vec<Vec<u32>>,
}

impl Graph {
    pub fn new(n: usize) -> Self {
        Self {
            out: vec![Vec::new(); n],
            inn: vec![Vec::new(); n],
        }
    }

    pub fn insert(&mut self, a: u32, b: u32) {
        self.out[a as usize].push(b);
        self.inn[b as usize].push(a);
    }

    pub fn remove(&mut self, a: u32, b: u32) {
        self.out[a as usize].retain(|&x| x != b);
        self.inn[b as usize].retain(|&x| x != a);
    }

    pub fn has(&self, a: u32, b: u32) -> bool {
        self.out[a as usize].contains(&b)
    }

    /// Whether `a` reaches `b`, by plain search.
    pub fn reaches(&self, a: u32, b: u32) -> bool {
        let mut seen = vec![false; self.out.len()];
        let mut stack = vec![a];
        seen[a as usize] = true;
        while let Some(v) = stack.pop() {
            if v == b {
                return true;
            }
            for &w in &self.out[v as usize] {
                if !seen[w as usize] {
                    seen[w as usize] = true;
                    stack.push(w);
                }
            }
        }
        false
    }

    /// One step of a random run against an incremental order: with
    /// `remove`, drops `a -> b` and offers nothing; else offers the edge
    /// to try (ends taken modulo the nodes) with whether it closes a
    /// cycle, the reference answer, or nothing when it is there already.
    pub fn step(&mut self, remove: bool, a: u32, b: u32) -> Option<(u32, u32, bool)> {
        let n = self.out.len() as u32;
        let (a, b) = (a % n, b % n);
        if remove {
            self.remove(a, b);
            return None;
        }
        if self.has(a, b) {
            return None;
        }
        Some((a, b, a == b || self.reaches(b, a)))
    }

    pub fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.out
            .iter()
            .enumerate()
            .flat_map(|(a, bs)| bs.iter().map(move |&b| (a as u32, b)))
    }
}

impl Digraph for Graph {
    fn successors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        self.out[v as usize].iter().copied()
    }
    fn predecessors(&self, v: u32) -> impl Iterator<Item = u32> + '_ {
        self.inn[v as usize].iter().copied()
    }
}
