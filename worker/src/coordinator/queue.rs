//! The open parts of a job cut in ranges, shared by the tasks that feed
//! one worker each: a pure queue, no I/O. A part is handed out once at a
//! time; a part whose worker was lost goes back for the others; what no
//! worker took is left for the caller to compute here; a worker that no
//! longer holds the job is sent it again once ([`after_failure`]).

use super::PartRun;
use std::collections::VecDeque;

/// What a worker's task does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Compute part `i`.
    Part(usize),
    /// Nothing open, but parts are out with other workers and may come
    /// back: ask again shortly.
    Wait,
    /// Every part is done: the task ends.
    Finished,
}

/// What a worker's task does with the answer to a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The worker no longer holds the job (it restarted, or dropped it for
    /// newer ones): send it the job again, then ask again.
    Reload,
    /// Take the answer as it is: the part, or the worker lost with it.
    Done,
}

/// The decision after asking for a part whose answer carried `code` (None:
/// a part, or a reply that is not a status), the job sent again `reloads`
/// times already for it: once, on `FAILED_PRECONDITION`.
pub fn after_failure(code: Option<tonic::Code>, reloads: u32) -> AfterFailure {
    match code {
        Some(tonic::Code::FailedPrecondition) if reloads == 0 => AfterFailure::Reload,
        _ => AfterFailure::Done,
    }
}

#[derive(Debug)]
pub struct Queue<T> {
    open: VecDeque<usize>,
    in_flight: usize,
    done: Vec<(usize, T, PartRun)>,
}

impl<T> Queue<T> {
    /// Parts `0..parts`, all open.
    pub fn new(parts: usize) -> Self {
        Self {
            open: (0..parts).collect(),
            in_flight: 0,
            done: Vec::new(),
        }
    }

    pub fn next(&mut self) -> Next {
        match self.open.pop_front() {
            Some(i) => {
                self.in_flight += 1;
                Next::Part(i)
            }
            None if self.in_flight == 0 => Next::Finished,
            None => Next::Wait,
        }
    }

    /// Part `i`, handed out by [`Queue::next`], is computed.
    pub fn done(&mut self, i: usize, part: T, run: PartRun) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.done.push((i, part, run));
    }

    /// Part `i`'s worker was lost: the part goes back for the others.
    pub fn failed(&mut self, i: usize) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.open.push_back(i);
    }

    /// The parts no worker took (every worker task has ended), now the
    /// caller's to compute here.
    pub fn take_open(&mut self) -> Vec<usize> {
        self.open.drain(..).collect()
    }

    /// A part computed here.
    pub fn done_here(&mut self, i: usize, part: T, run: PartRun) {
        self.done.push((i, part, run));
    }

    /// The parts and their runs, in cut order.
    pub fn finish(&mut self) -> (Vec<T>, Vec<PartRun>) {
        let mut done = std::mem::take(&mut self.done);
        done.sort_by_key(|d| d.0);
        done.into_iter().map(|(_, p, r)| (p, r)).unzip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(i: usize, by: &str) -> PartRun {
        PartRun {
            start: i,
            end: i + 1,
            by: by.into(),
            seconds: 0.0,
        }
    }

    #[test]
    fn every_part_is_handed_out_once_and_comes_back_in_cut_order() {
        let mut q = Queue::new(3);
        let mut taken = Vec::new();
        while let Next::Part(i) = q.next() {
            taken.push(i);
        }
        assert_eq!(taken, [0, 1, 2]);
        assert_eq!(q.next(), Next::Wait, "parts are out");
        for i in [2, 0, 1] {
            q.done(i, i * 10, run(i, "w"));
        }
        assert_eq!(q.next(), Next::Finished);
        let (parts, runs) = q.finish();
        assert_eq!(parts, [0, 10, 20]);
        assert_eq!(runs.iter().map(|r| r.start).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn a_lost_workers_part_goes_to_another() {
        let mut q: Queue<u8> = Queue::new(2);
        assert_eq!(q.next(), Next::Part(0));
        assert_eq!(q.next(), Next::Part(1));
        q.failed(0);
        assert_eq!(q.next(), Next::Part(0), "handed out again");
        q.done(0, 0, run(0, "b"));
        q.done(1, 1, run(1, "a"));
        assert_eq!(q.next(), Next::Finished);
        assert_eq!(
            q.finish()
                .1
                .iter()
                .map(|r| r.by.as_str())
                .collect::<Vec<_>>(),
            ["b", "a"]
        );
    }

    #[test]
    fn a_dropped_job_is_sent_again_once() {
        let dropped = Some(tonic::Code::FailedPrecondition);
        assert_eq!(after_failure(dropped, 0), AfterFailure::Reload);
        assert_eq!(after_failure(dropped, 1), AfterFailure::Done, "then lost");
        assert_eq!(after_failure(None, 0), AfterFailure::Done);
        assert_eq!(
            after_failure(Some(tonic::Code::Unavailable), 0),
            AfterFailure::Done
        );
    }

    #[test]
    fn what_no_worker_took_is_computed_here() {
        let mut q: Queue<u8> = Queue::new(3);
        assert_eq!(q.next(), Next::Part(0));
        q.failed(0);
        // Every worker is gone: the caller takes what is open.
        let left = q.take_open();
        assert_eq!(left, [1, 2, 0]);
        for i in left {
            q.done_here(i, i as u8, run(i, "local"));
        }
        assert_eq!(q.next(), Next::Finished);
        assert_eq!(q.finish().0, [0, 1, 2]);
    }
}
