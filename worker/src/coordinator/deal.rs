//! Who routes which units of a job in rounds, and what a failed call does
//! to them: a pure state machine, no I/O. It says what to do next (send
//! the job to a worker again, replay the group where it now is: a new
//! session on a worker, or here); the caller (`rounds.rs`) makes the calls
//! and reports back. Every recovery path is tested here without
//! processes.

/// Where a group of units is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// A session on worker `w` (index into the job's workers).
    Worker { w: usize, session: u64 },
    /// Here.
    Here,
}

/// Why a group's call failed (the routing's own errors fail the job and
/// never reach the deal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The worker is lost (connection, lease, malformed reply), or the
    /// units here were already finished: the group moves.
    Lost(String),
    /// The worker no longer holds the job (it restarted, or dropped it for
    /// newer ones): send it again there and replay in a new session.
    Dropped(String),
    /// The worker holds the job but not the session, or not at that
    /// round: a new session there replays.
    Restart(String),
}

/// What the caller does next for a failed group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send the job to worker `w` again, then report the outcome to
    /// [`Deal::reloaded`].
    SendJob { w: usize, why: String },
    /// The group starts again at round 0 where [`Group::at`] now says (on
    /// [`At::Here`] the caller starts its units here).
    Replay,
}

/// Times a group starts again on its worker (the job sent again, or a new
/// session) before it moves elsewhere: a worker that keeps dropping it is
/// too busy.
pub const RELOADS: u32 = 2;

/// Units routed together, by one holder.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    ids: Vec<usize>,
    at: At,
    /// The next round the holder routes (rounds before it are routed).
    pub next: usize,
    /// Seconds the holders reported for this group's calls.
    pub seconds: f64,
    /// Times the group started again on its worker.
    reloads: u32,
}

impl Group {
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    pub fn at(&self) -> At {
        self.at
    }

    fn new(ids: Vec<usize>, at: At) -> Self {
        Self {
            ids,
            at,
            next: 0,
            seconds: 0.0,
            reloads: 0,
        }
    }
}

/// The job's groups and workers.
#[derive(Debug, Clone)]
pub struct Deal {
    groups: Vec<Group>,
    /// Per worker: why it was given up on (None while it serves).
    lost: Vec<Option<String>>,
    /// Per worker: units it holds now.
    holds: Vec<usize>,
    /// The last session id handed out.
    session: u64,
}

impl Deal {
    /// Deals `units` round robin over the workers whose load succeeded
    /// (`loaded[w]`, or why not: those are lost from the start), sessions
    /// numbered after `first_session`. With no worker left, or no round to
    /// route (`rounds == 0`), every unit is one group here.
    pub fn new(
        loaded: &[Result<(), String>],
        units: usize,
        rounds: usize,
        first_session: u64,
    ) -> Self {
        let lost: Vec<Option<String>> = loaded.iter().map(|l| l.clone().err()).collect();
        let live: Vec<usize> = (0..loaded.len()).filter(|&w| lost[w].is_none()).collect();
        let mut d = Self {
            groups: Vec::new(),
            holds: vec![0; loaded.len()],
            lost,
            session: first_session,
        };
        if live.is_empty() || rounds == 0 {
            d.groups.push(Group::new((0..units).collect(), At::Here));
            return d;
        }
        for (j, &w) in live.iter().enumerate().take(units) {
            let ids: Vec<usize> = (j..units).step_by(live.len()).collect();
            d.holds[w] += ids.len();
            let session = d.next_session();
            d.groups.push(Group::new(ids, At::Worker { w, session }));
        }
        d
    }

    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The groups, to route side by side (their holders and units stay
    /// the deal's to change).
    pub fn groups_mut(&mut self) -> &mut [Group] {
        &mut self.groups
    }

    /// Whether worker `w` still serves the job.
    pub fn live(&self, w: usize) -> bool {
        self.lost.get(w).is_some_and(Option::is_none)
    }

    /// Why worker `w` was given up on, if it was.
    pub fn lost(&self, w: usize) -> Option<&str> {
        self.lost.get(w).and_then(|l| l.as_deref())
    }

    /// Units worker `w` holds now.
    #[cfg(test)]
    pub fn holds(&self, w: usize) -> usize {
        self.holds.get(w).copied().unwrap_or(0)
    }

    fn next_session(&mut self) -> u64 {
        self.session += 1;
        self.session
    }

    /// What group `g`'s failed call `f` does to it.
    pub fn fail(&mut self, g: usize, f: Failure) -> Action {
        match f {
            Failure::Lost(why) => self.move_group(g, why),
            Failure::Dropped(why) => self.restart(g, why, true),
            Failure::Restart(why) => self.restart(g, why, false),
        }
    }

    /// The job was sent again to the worker of group `g` (after
    /// [`Action::SendJob`] for `why`): on success the group replays there
    /// in a new session, else it moves.
    pub fn reloaded(&mut self, g: usize, why: String, sent: Result<(), String>) -> Action {
        match (sent, self.groups[g].at) {
            (Ok(()), At::Worker { w, .. }) if self.live(w) => {
                let session = self.next_session();
                let grp = &mut self.groups[g];
                grp.at = At::Worker { w, session };
                grp.next = 0;
                Action::Replay
            }
            (Ok(()), _) => self.move_group(g, why),
            (Err(e), _) => self.move_group(g, format!("{why}; loading it again: {e}")),
        }
    }

    /// Starts group `g` again on its worker, unless it did too often or
    /// the worker is gone: then it moves.
    fn restart(&mut self, g: usize, why: String, send_job: bool) -> Action {
        let At::Worker { w, .. } = self.groups[g].at else {
            return self.move_group(g, why);
        };
        let reloads = self.groups[g].reloads;
        if reloads >= RELOADS {
            let why = format!("{why} (dropped the job {} times)", reloads + 1);
            return self.move_group(g, why);
        }
        if !self.live(w) {
            return self.move_group(g, why);
        }
        self.groups[g].reloads += 1;
        if send_job {
            return Action::SendJob { w, why };
        }
        let session = self.next_session();
        let grp = &mut self.groups[g];
        grp.at = At::Worker { w, session };
        grp.next = 0;
        Action::Replay
    }

    /// Gives up on group `g`'s worker (the first reason kept) and gives
    /// the group to the live worker holding the fewest units (the lowest
    /// index on a tie), or here when none is left; it replays from round 0.
    fn move_group(&mut self, g: usize, why: String) -> Action {
        let ids = self.groups[g].ids.len();
        if let At::Worker { w, .. } = self.groups[g].at {
            tracing::warn!(worker = w, "worker lost: {why}");
            self.lost[w].get_or_insert(why);
            self.holds[w] = self.holds[w].saturating_sub(ids);
        }
        let best = (0..self.lost.len())
            .filter(|&w| self.live(w))
            .min_by_key(|&w| (self.holds[w], w));
        let at = match best {
            Some(w) => {
                self.holds[w] += ids;
                At::Worker {
                    w,
                    session: self.next_session(),
                }
            }
            None => At::Here,
        };
        let grp = &mut self.groups[g];
        grp.at = at;
        grp.next = 0;
        Action::Replay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(n: usize) -> Vec<Result<(), String>> {
        vec![Ok(()); n]
    }

    fn workers_of(d: &Deal) -> Vec<Option<usize>> {
        d.groups()
            .iter()
            .map(|g| match g.at {
                At::Worker { w, .. } => Some(w),
                At::Here => None,
            })
            .collect()
    }

    #[test]
    fn units_are_dealt_round_robin_over_the_workers_that_loaded() {
        let d = Deal::new(&[Ok(()), Err("load: refused".into()), Ok(())], 5, 3, 100);
        let ids: Vec<&[usize]> = d.groups().iter().map(|g| g.ids.as_slice()).collect();
        assert_eq!(ids, [&[0, 2, 4][..], &[1, 3][..]]);
        assert_eq!(workers_of(&d), [Some(0), Some(2)]);
        assert_eq!(d.lost(1), Some("load: refused"));
        assert_eq!((d.holds(0), d.holds(1), d.holds(2)), (3, 0, 2));
        let sessions: Vec<u64> = d
            .groups()
            .iter()
            .filter_map(|g| match g.at {
                At::Worker { session, .. } => Some(session),
                At::Here => None,
            })
            .collect();
        assert_eq!(sessions, [101, 102], "distinct sessions");
    }

    #[test]
    fn fewer_units_than_workers_leave_the_others_idle() {
        let d = Deal::new(&ok(4), 2, 3, 0);
        assert_eq!(workers_of(&d), [Some(0), Some(1)]);
        assert_eq!(d.holds(3), 0);
    }

    #[test]
    fn with_no_worker_or_no_round_everything_is_routed_here() {
        for d in [
            Deal::new(&[Err("x".into()), Err("y".into())], 3, 2, 0),
            Deal::new(&ok(2), 3, 0, 0),
            Deal::new(&[], 3, 2, 0),
        ] {
            assert_eq!(d.groups().len(), 1);
            assert_eq!(d.groups()[0].ids, [0, 1, 2]);
            assert_eq!(d.groups()[0].at, At::Here);
        }
    }

    #[test]
    fn a_lost_worker_gives_its_group_to_the_least_loaded_live_one() {
        let mut d = Deal::new(&ok(3), 7, 2, 0);
        // Holds 3, 2, 2; worker 0 is lost.
        d.groups_mut()[0].next = 2;
        assert_eq!(d.fail(0, Failure::Lost("reset".into())), Action::Replay);
        assert_eq!(d.lost(0), Some("reset"));
        assert!(!d.live(0));
        let g = &d.groups()[0];
        assert_eq!(g.next, 0, "replays from round 0");
        assert!(matches!(g.at, At::Worker { w: 1, session: 4 }), "{g:?}");
        assert_eq!((d.holds(0), d.holds(1), d.holds(2)), (0, 5, 2));
        // Then worker 1 too: both its groups end on worker 2.
        d.fail(1, Failure::Lost("lease ended".into()));
        assert_eq!(d.holds(1), 3, "the other group still counts");
        d.fail(0, Failure::Lost("later reason".into()));
        assert_eq!(d.lost(1), Some("lease ended"), "the first reason is kept");
        assert_eq!(workers_of(&d), [Some(2), Some(2), Some(2)]);
        assert_eq!(d.holds(2), 7);
    }

    #[test]
    fn with_no_live_worker_left_the_group_moves_here() {
        let mut d = Deal::new(&ok(1), 2, 2, 0);
        assert_eq!(d.fail(0, Failure::Lost("gone".into())), Action::Replay);
        assert_eq!(d.groups()[0].at, At::Here);
        // Finished units here asked again move again (here, nothing else).
        assert_eq!(d.fail(0, Failure::Lost("finished".into())), Action::Replay);
        assert_eq!(d.groups()[0].at, At::Here);
    }

    #[test]
    fn a_dropped_job_is_sent_again_then_replayed_in_a_new_session() {
        let mut d = Deal::new(&ok(2), 4, 3, 10);
        d.groups_mut()[1].next = 2;
        let a = d.fail(1, Failure::Dropped("no such job".into()));
        assert_eq!(
            a,
            Action::SendJob {
                w: 1,
                why: "no such job".into()
            }
        );
        assert_eq!(d.reloaded(1, "no such job".into(), Ok(())), Action::Replay);
        let g = &d.groups()[1];
        assert!(matches!(g.at, At::Worker { w: 1, session: 13 }), "{g:?}");
        assert_eq!(g.next, 0);
        assert!(d.live(1));
    }

    #[test]
    fn a_failed_reload_moves_the_group_and_loses_the_worker() {
        let mut d = Deal::new(&ok(2), 4, 3, 0);
        d.fail(0, Failure::Dropped("no such job".into()));
        d.reloaded(0, "no such job".into(), Err("unavailable".into()));
        assert_eq!(
            d.lost(0),
            Some("no such job; loading it again: unavailable")
        );
        assert_eq!(workers_of(&d), [Some(1), Some(1)]);
    }

    #[test]
    fn a_lost_session_starts_a_new_one_on_the_same_worker() {
        let mut d = Deal::new(&ok(2), 4, 3, 0);
        d.groups_mut()[0].next = 1;
        assert_eq!(
            d.fail(0, Failure::Restart("no session".into())),
            Action::Replay
        );
        let g = &d.groups()[0];
        assert!(matches!(g.at, At::Worker { w: 0, session: 3 }), "{g:?}");
        assert_eq!(g.next, 0);
        assert!(d.live(0), "the worker still serves");
    }

    #[test]
    fn a_worker_that_keeps_dropping_the_job_is_given_up_on() {
        let mut d = Deal::new(&ok(2), 4, 3, 0);
        for _ in 0..RELOADS {
            match d.fail(0, Failure::Dropped("dropped".into())) {
                Action::SendJob { .. } => {
                    assert_eq!(d.reloaded(0, "dropped".into(), Ok(())), Action::Replay)
                }
                a => panic!("{a:?}"),
            }
        }
        assert_eq!(d.fail(0, Failure::Restart("again".into())), Action::Replay);
        assert_eq!(
            d.lost(0),
            Some(format!("again (dropped the job {} times)", RELOADS + 1).as_str())
        );
        assert_eq!(workers_of(&d), [Some(1), Some(1)]);
    }

    #[test]
    fn a_group_whose_worker_was_lost_meanwhile_moves_instead_of_restarting() {
        let mut d = Deal::new(&ok(3), 3, 3, 0);
        // Group 0 moves from worker 0 to worker 1 (a tie with worker 2,
        // the lower index wins), then worker 1 is lost through group 1.
        d.fail(0, Failure::Lost("reset".into()));
        assert!(matches!(d.groups()[0].at, At::Worker { w: 1, .. }));
        d.fail(1, Failure::Lost("lease ended".into()));
        assert!(matches!(d.groups()[0].at, At::Worker { w: 1, .. }));
        // Group 0's late answer from worker 1 asks for a new session: it
        // moves instead, and counts no restart.
        assert_eq!(d.fail(0, Failure::Restart("late".into())), Action::Replay);
        assert_eq!(workers_of(&d), [Some(2), Some(2), Some(2)]);
        assert_eq!(d.holds(2), 3);
        assert_eq!(d.lost(1), Some("lease ended"));
    }
}
