//! Whose turn it is: each owner's waiting tasks first in, first out, and the owners taking turns
//! (round robin), so one owner's long queue never starves another's single task. Pure
//! bookkeeping, no locks and no processes.

use std::collections::{HashMap, VecDeque};

/// The waiting tasks (each a `T`, named by an id) of every owner, and how many each owner runs.
pub(super) struct Turns<T> {
    waiting: HashMap<String, VecDeque<(String, T)>>,
    /// Owners with waiting tasks, the next to get a turn first.
    order: VecDeque<String>,
    running: HashMap<String, u64>,
    total: u64,
}

impl<T> Turns<T> {
    pub(super) fn new() -> Self {
        Self {
            waiting: HashMap::new(),
            order: VecDeque::new(),
            running: HashMap::new(),
            total: 0,
        }
    }

    /// Tasks running, of every owner.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// Tasks `owner` runs.
    pub(super) fn running_of(&self, owner: &str) -> u64 {
        self.running.get(owner).copied().unwrap_or(0)
    }

    /// Tasks `owner` has waiting.
    pub(super) fn waiting_of(&self, owner: &str) -> usize {
        self.waiting.get(owner).map_or(0, VecDeque::len)
    }

    /// Counts a task of `owner` as running.
    pub(super) fn run(&mut self, owner: &str) {
        *self.running.entry(owner.to_owned()).or_insert(0) += 1;
        self.total += 1;
    }

    /// A running task of `owner` ended.
    pub(super) fn ended(&mut self, owner: &str) {
        if let Some(n) = self.running.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(owner);
            }
            self.total = self.total.saturating_sub(1);
        }
    }

    /// Puts task `id` of `owner` at the end of its owner's line; an owner without waiting tasks
    /// takes its turn after every owner waiting already.
    pub(super) fn push(&mut self, owner: &str, id: String, item: T) {
        let line = self.waiting.entry(owner.to_owned()).or_default();
        if line.is_empty() {
            self.order.push_back(owner.to_owned());
        }
        line.push_back((id, item));
    }

    /// Takes task `id` out of its line, wherever it is.
    pub(super) fn remove(&mut self, id: &str) -> Option<T> {
        let (owner, at) = self.waiting.iter().find_map(|(owner, line)| {
            line.iter()
                .position(|(i, _)| i == id)
                .map(|at| (owner.clone(), at))
        })?;
        let line = self.waiting.get_mut(&owner)?;
        let (_, item) = line.remove(at)?;
        if line.is_empty() {
            self.waiting.remove(&owner);
            self.order.retain(|o| *o != owner);
        }
        Some(item)
    }

    /// The next task to run, with its owner, counted running: the first waiting task of the first
    /// owner in turn that `may_run` allows; that owner's turn passes to the back. Owners passed
    /// over keep their place.
    pub(super) fn next(
        &mut self,
        may_run: impl Fn(&Self, &str) -> bool,
    ) -> Option<(String, String, T)> {
        let at = self.order.iter().position(|owner| may_run(self, owner))?;
        let owner = self.order.remove(at)?;
        let line = self.waiting.get_mut(&owner)?;
        let (id, item) = line.pop_front()?;
        if line.is_empty() {
            self.waiting.remove(&owner);
        } else {
            self.order.push_back(owner.clone());
        }
        self.run(&owner);
        Some((owner, id, item))
    }

    /// Every waiting task's id with how many tasks would run before it if nothing else arrived
    /// (the owners taking turns, limits aside), in that order.
    pub(super) fn ranks(&self) -> Vec<(String, usize)> {
        let mut ranked = Vec::new();
        let mut round = 0;
        loop {
            let before = ranked.len();
            for owner in &self.order {
                if let Some((id, _)) = self.waiting.get(owner).and_then(|l| l.get(round)) {
                    ranked.push((id.clone(), ranked.len()));
                }
            }
            if ranked.len() == before {
                return ranked;
            }
            round += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Turns;

    fn turns(starts: &[(&str, &str)]) -> Turns<()> {
        let mut t = Turns::new();
        for (owner, id) in starts {
            t.push(owner, (*id).to_owned(), ());
        }
        t
    }

    #[test]
    fn owners_take_turns_and_each_line_is_first_in_first_out() {
        let mut t = turns(&[("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")]);
        let order: Vec<String> =
            std::iter::from_fn(|| t.next(|_, _| true).map(|(_, id, ())| id)).collect();
        assert_eq!(order, ["a1", "b1", "a2", "a3"]);
        assert_eq!(t.total(), 4);
        assert_eq!(t.running_of("a"), 3);
    }

    #[test]
    fn an_owner_at_its_limit_is_passed_over_and_keeps_its_place() {
        let mut t = turns(&[("a", "a1"), ("b", "b1"), ("b", "b2")]);
        t.run("a");
        let next = t.next(|t, owner| t.running_of(owner) < 1);
        assert_eq!(next.map(|(_, id, ())| id).as_deref(), Some("b1"));
        t.ended("a");
        let next = t.next(|t, owner| t.running_of(owner) < 1);
        assert_eq!(next.map(|(_, id, ())| id).as_deref(), Some("a1"));
    }

    #[test]
    fn ranks_count_what_runs_before_each_task() {
        let t = turns(&[("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")]);
        assert_eq!(
            t.ranks(),
            [("a1", 0), ("b1", 1), ("a2", 2), ("a3", 3)].map(|(id, n)| (id.to_owned(), n))
        );
    }

    #[test]
    fn a_removed_task_leaves_no_turn_behind() {
        let mut t = turns(&[("a", "a1"), ("b", "b1")]);
        assert!(t.remove("a1").is_some());
        assert_eq!(t.waiting_of("a"), 0);
        assert_eq!(
            t.next(|_, _| true).map(|(_, id, ())| id).as_deref(),
            Some("b1")
        );
        assert!(t.next(|_, _| true).is_none());
    }
}
