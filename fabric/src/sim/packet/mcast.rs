//! Multicast in the packet model: a sender's packets start on its link,
//! and a switch copies each onto the channels its group's entry gives for
//! the link it came in over (built once per group and link, when first
//! needed, and shared by every sender).

use super::{Channel, McastPaths, Message, Paths, ROOT, Sim, VLS};
use crate::error::Result;
use crate::sim::sim_err;

/// One channel a multicast packet travels on; its children are the copies
/// the switch at its far end makes, resolved when a packet first arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TreeNode {
    pub channel: Channel,
    /// Index in `tree_nodes` of the first copy ([`ROOT`]: not resolved).
    pub first: u32,
    pub children: u16,
    /// A host is at the far end and consumes the copy. A switch with no
    /// port to copy onto drops it.
    pub to_host: bool,
}

impl<'a, P: Paths + ?Sized> Sim<'a, P> {
    /// Lets [`Self::send_mcast`] send to the groups of `m`.
    pub fn with_mcast(mut self, m: &'a dyn McastPaths) -> Self {
        self.mcast = Some(m);
        self
    }

    /// Queues a message of `bytes` from host `src` to every receiver of
    /// multicast group `group`, as [`Self::send`] does; `tag` comes back
    /// once every receiver has consumed it. A switch sends a copy on each
    /// port of the group's entry but the one the packet came in on, and
    /// frees the packet's buffer when the last copy has left: its input
    /// channel waits on every output channel of the tree.
    pub fn send_mcast(
        &mut self,
        src: usize,
        group: usize,
        bytes: u64,
        packet: u32,
        tag: u64,
    ) -> Result<()> {
        let hosts = self.net.hosts().len();
        if src >= hosts || packet == 0 || packet > self.cfg.mtu || bytes == 0 {
            return Err(sim_err(format!(
                "no {bytes}-byte multicast from host {src} of {hosts} in packets of {packet} bytes (MTU {})",
                self.cfg.mtu
            )));
        }
        let (node, receivers) = self.first_node(src, group)?;
        let vl = self.tree_nodes[node as usize].channel.1;
        let m = Message {
            path: node,
            len: 0,
            mcast: true,
            group: group as u32,
            left: u64::from(receivers),
            tag,
        };
        self.enqueue(src, vl, m, bytes, packet, ROOT)
    }

    fn first_node(&mut self, src: usize, group: usize) -> Result<(u32, u32)> {
        let key = (group as u32, src as u32);
        if let Some(&t) = self.first_of.get(&key) {
            return Ok(t);
        }
        let Some(mc) = self.mcast else {
            return Err(sim_err("this simulation has no multicast groups".into()));
        };
        if group >= mc.num_groups() {
            return Err(sim_err(format!(
                "no multicast group {group} among {}",
                mc.num_groups()
            )));
        }
        let (channel, receivers) = mc.first(group, src)?;
        if receivers == 0 {
            return Err(sim_err(format!(
                "group {group} has no receiver for host {src}'s copies"
            )));
        }
        self.check_channel(channel)?;
        let t = (self.push_node(channel, false)?, receivers);
        self.first_of.insert(key, t);
        Ok(t)
    }

    fn check_channel(&self, (l, vl): Channel) -> Result<()> {
        if l as usize >= self.links || vl as usize >= VLS {
            return Err(sim_err(format!("channel (link {l}, VL {vl}) out of range")));
        }
        Ok(())
    }

    fn push_node(&mut self, channel: Channel, to_host: bool) -> Result<u32> {
        let n = u32::try_from(self.tree_nodes.len())
            .ok()
            .filter(|&n| n < ROOT)
            .ok_or_else(|| sim_err("too many multicast copies to keep".into()))?;
        self.vls_seen = self.vls_seen.max(channel.1 as usize + 1);
        self.tree_nodes.push(TreeNode {
            channel,
            first: ROOT,
            children: 0,
            to_host,
        });
        Ok(n)
    }

    /// Gives node `n` its copies (those of its group and link, built the
    /// first time either is seen). The flood check of
    /// [`McastPaths::first`] has passed for every sender whose packets
    /// get here, so the copies are in range and loop-free.
    pub(super) fn resolve(&mut self, n: u32, group: u32) {
        let node = self.tree_nodes[n as usize];
        if node.first != ROOT || node.to_host {
            return;
        }
        let link = node.channel.0;
        let run = match self.runs.get(&(group, link)) {
            Some(&r) => r,
            None => {
                let mut out = std::mem::take(&mut self.copies_scratch);
                out.clear();
                if let Some(mc) = self.mcast {
                    mc.copies(group as usize, link, &mut out);
                }
                let first = self.tree_nodes.len() as u32;
                let mut count = 0u16;
                for &(c, to_host) in &out {
                    if self.check_channel(c).is_ok() && self.push_node(c, to_host).is_ok() {
                        count = count.saturating_add(1);
                    }
                }
                self.copies_scratch = out;
                self.runs.insert((group, link), (first, count));
                (first, count)
            }
        };
        let node = &mut self.tree_nodes[n as usize];
        node.first = run.0;
        node.children = run.1;
    }
}
