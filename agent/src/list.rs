//! The channel list DQR reroutes on, kept beside the tables in force:
//! taken for a reroute and put back, built in the background from the
//! tables in force, pruned once an update is applied.

use super::*;

impl Agent {
    pub(crate) fn take_list(&self) -> Option<ChannelList> {
        self.list
            .lock()
            .ok()
            .and_then(|mut l| l.take())
            .map(|(_, l)| l)
    }

    /// Keeps `list` as the channel list of `of` (when `of` is still the
    /// subnet in force).
    pub(crate) fn put_list(&self, list: Option<ChannelList>, of: Option<&Arc<RoutedSubnet>>) {
        let (Some(list), Some(of)) = (list, of) else {
            return;
        };
        if let Ok(mut l) = self.list.lock() {
            *l = Some((Arc::downgrade(of), list));
        }
    }

    /// Builds the channel list of `routed` in the background; it is kept
    /// only if `routed` is still in force when it is ready.
    pub(crate) fn build_list(self: &Arc<Self>, routed: Arc<RoutedSubnet>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            match ChannelList::build(&routed.fabric, routed.routing.get()) {
                Ok((list, _)) => {
                    let current = me.subnet.load_full();
                    if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &routed)) {
                        tracing::debug!(
                            seconds = t.elapsed().as_secs_f64(),
                            dependencies = list.num_edges(),
                            "channel list built: failures will be rerouted by DQR"
                        );
                        me.put_list(Some(list), Some(&routed));
                    }
                }
                Err(e) => tracing::warn!("no channel list, failures will be recomputed: {e}"),
            }
        });
    }

    /// Prunes a copy of the channel list DQR extended for `routed` to the
    /// dependencies of its tables, in the background; the copy replaces
    /// the carried list only if `routed` is still in force and no reroute
    /// took the list meanwhile.
    pub(crate) fn prune_list(self: &Arc<Self>, routed: Arc<RoutedSubnet>) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            let copy = me
                .list
                .lock()
                .ok()
                .and_then(|l| held_for(&l, &routed).cloned());
            let Some(mut list) = copy else { return };
            match list.prune_to(&routed.fabric, routed.routing.get()) {
                Ok(false) => {}
                Ok(true) => {
                    let current = me.subnet.load_full();
                    let in_force = current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &routed));
                    if let Ok(mut l) = me.list.lock() {
                        if in_force && held_for(&l, &routed).is_some() {
                            tracing::debug!(
                                seconds = t.elapsed().as_secs_f64(),
                                dependencies = list.num_edges(),
                                "channel list pruned to the tables in force"
                            );
                            *l = Some((Arc::downgrade(&routed), list));
                        }
                    }
                }
                Err(e) => tracing::warn!("channel list kept unpruned: {e}"),
            }
        });
    }

    /// Dependencies in the channel list of the tables in force (`None`
    /// until it is built): after a DQR update they fall to the new tables'
    /// own once the list is pruned.
    pub fn channel_list_dependencies(&self) -> Option<usize> {
        let cur = self.subnet.load_full()?;
        let l = self.list.lock().ok()?;
        held_for(&l, &cur).map(ChannelList::num_edges)
    }

    /// Whether the channel list of the tables in force is ready (DQR can
    /// reroute the next failure).
    pub fn dqr_ready(&self) -> bool {
        let Some(cur) = self.subnet.load_full() else {
            return false;
        };
        self.list
            .lock()
            .ok()
            .is_some_and(|l| held_for(&l, &cur).is_some())
    }
}
