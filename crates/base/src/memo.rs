//! A bounded memo for pure functions that cost a lot on this hardware (SHA-256 on a CPU without
//! SHA instructions) and are called with few distinct arguments: filter values, the runs a
//! client keeps polling. It forgets everything when full, which keeps it bounded without any
//! bookkeeping per entry; because few arguments repeat, it fills up again with them at once.
//! Callers keep one per thread (`thread_local!`), so it needs no lock.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

pub struct Memo<K, V> {
    values: HashMap<K, V>,
    capacity: usize,
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    /// A memo of at most `capacity` values.
    pub fn new(capacity: usize) -> Memo<K, V> {
        Memo {
            values: HashMap::new(),
            capacity,
        }
    }

    /// The value for `key`: remembered, or computed by `compute` and remembered.
    pub fn get_or_compute<Q>(&mut self, key: &Q, compute: impl FnOnce() -> V) -> V
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(value) = self.values.get(key) {
            return value.clone();
        }
        let value = compute();
        if self.values.len() >= self.capacity {
            self.values.clear();
        }
        self.values.insert(key.to_owned(), value.clone());
        value
    }

    pub fn clear(&mut self) {
        self.values.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_once_per_key_and_stays_within_its_capacity() {
        let mut memo: Memo<String, usize> = Memo::new(3);
        let mut calls = 0;
        for _ in 0..2 {
            for key in ["a", "bb", "ccc"] {
                let len = memo.get_or_compute(key, || {
                    calls += 1;
                    key.len()
                });
                assert_eq!(len, key.len());
            }
        }
        assert_eq!(calls, 3, "the second round is remembered");
        assert_eq!(memo.get_or_compute("dddd", || 4), 4);
        assert!(memo.values.len() <= 3);
    }
}
