//! Connection storage: dense slots with a generation each, so that a handle to a closed
//! connection is recognised as stale even after its slot is reused.

use crate::Conn;

pub(crate) struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
}

struct Entry<T> {
    generation: u32,
    value: Option<T>,
}

impl<T> Slab<T> {
    pub fn new() -> Slab<T> {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }

    pub fn insert(&mut self, value: T) -> Conn {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.entries.push(Entry {
                    generation: 0,
                    value: None,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let e = &mut self.entries[slot as usize];
        e.generation = e.generation.wrapping_add(1);
        e.value = Some(value);
        Conn {
            slot,
            generation: e.generation,
        }
    }

    pub fn get(&self, conn: Conn) -> Option<&T> {
        let e = self.entries.get(conn.slot as usize)?;
        if e.generation == conn.generation {
            e.value.as_ref()
        } else {
            None
        }
    }

    pub fn get_mut(&mut self, conn: Conn) -> Option<&mut T> {
        let e = self.entries.get_mut(conn.slot as usize)?;
        if e.generation == conn.generation {
            e.value.as_mut()
        } else {
            None
        }
    }

    /// The live handle for a slot, if occupied.
    pub fn handle(&self, slot: u32) -> Option<Conn> {
        let e = self.entries.get(slot as usize)?;
        e.value.as_ref().map(|_| Conn {
            slot,
            generation: e.generation,
        })
    }

    /// The live handles, in slot order.
    pub fn handles(&self) -> impl Iterator<Item = Conn> + '_ {
        self.entries.iter().enumerate().filter_map(|(slot, e)| {
            e.value.as_ref().map(|_| Conn {
                slot: slot as u32,
                generation: e.generation,
            })
        })
    }

    pub fn remove(&mut self, conn: Conn) -> Option<T> {
        let e = self.entries.get_mut(conn.slot as usize)?;
        if e.generation != conn.generation {
            return None;
        }
        let v = e.value.take();
        if v.is_some() {
            self.free.push(conn.slot);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_are_refused_after_reuse() {
        let mut s = Slab::new();
        let a = s.insert("a");
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b");
        assert_eq!(a.slot, b.slot);
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.handle(b.slot), Some(b));
    }
}
