//! Compact, append-only keyed tables for the parts of a session that grow with every event:
//! the provenance graph (keyed by provenance id), the turn ids and the step labels (keyed by
//! request id).
//!
//! An entry lives in a chunk of [`CHUNK`] entries; a string key is copied once into its
//! chunk's byte arena and named by (offset, length), never by its own allocation. The index is
//! a flat hash table of `u32` entry numbers, hashed with std's keyed SipHash (a client chooses
//! the ids, so the hash must not be predictable). A node costs its value, 8 bytes of key
//! reference, its key's bytes and about 6 bytes of index, instead of an `Arc<str>` and a
//! persistent-map leaf.
//!
//! Clones are cheap: the chunks and the index are shared (`Arc`) and copied on the first write
//! after a clone (the index whole, a chunk only when written to). A decision never clones a
//! session; a snapshot, or a subagent's start, does, and the next commit of the session that
//! still shares its tables pays one copy of the index.

use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, LazyLock};

use hashbrown::HashTable;

/// Entries per chunk.
const CHUNK: usize = 4096;

static KEYS: LazyLock<std::collections::hash_map::RandomState> =
    LazyLock::new(std::collections::hash_map::RandomState::new);

fn hash<K: Hash + ?Sized>(k: &K) -> u64 {
    KEYS.hash_one(k)
}

/// One stored entry: its value and, for string keys, where its key is in the chunk's arena.
pub(crate) trait Entry: Clone {
    type Key: ?Sized + Eq + Hash;
    type Value;
    fn key<'a>(&'a self, text: &'a [u8]) -> &'a Self::Key;
    fn value(&self) -> &Self::Value;
    fn value_mut(&mut self) -> &mut Self::Value;
    /// The key's bytes that go into the arena.
    fn key_len(key: &Self::Key) -> usize;
    fn make(key: &Self::Key, value: Self::Value, text: &mut Vec<u8>) -> Self;
}

/// An entry keyed by a string (its bytes), stored in the chunk's arena.
#[derive(Clone, Debug)]
pub(crate) struct StrEntry<V> {
    value: V,
    off: u32,
    len: u32,
}

impl<V: Clone> Entry for StrEntry<V> {
    type Key = [u8];
    type Value = V;
    fn key<'a>(&'a self, text: &'a [u8]) -> &'a [u8] {
        &text[self.off as usize..self.off as usize + self.len as usize]
    }
    fn value(&self) -> &V {
        &self.value
    }
    fn value_mut(&mut self) -> &mut V {
        &mut self.value
    }
    fn key_len(key: &[u8]) -> usize {
        key.len()
    }
    fn make(key: &[u8], value: V, text: &mut Vec<u8>) -> Self {
        let off = text.len() as u32;
        text.extend_from_slice(key);
        StrEntry {
            value,
            off,
            len: key.len() as u32,
        }
    }
}

/// An entry keyed by 128 bits (a request id), kept inline as two words (8-byte aligned, so an
/// entry with a `u64` value is 24 bytes).
#[derive(Clone, Debug)]
pub(crate) struct IdEntry<V> {
    key: [u64; 2],
    value: V,
}

impl<V: Clone> Entry for IdEntry<V> {
    type Key = [u64; 2];
    type Value = V;
    fn key<'a>(&'a self, _: &'a [u8]) -> &'a [u64; 2] {
        &self.key
    }
    fn value(&self) -> &V {
        &self.value
    }
    fn value_mut(&mut self) -> &mut V {
        &mut self.value
    }
    fn key_len(_: &[u64; 2]) -> usize {
        0
    }
    fn make(key: &[u64; 2], value: V, _: &mut Vec<u8>) -> Self {
        IdEntry { key: *key, value }
    }
}

#[derive(Clone)]
struct Chunk<E> {
    entries: Vec<E>,
    text: Vec<u8>,
}

/// The table: chunks of entries and an index of entry numbers.
pub(crate) struct Table<E> {
    chunks: Vec<Arc<Chunk<E>>>,
    index: Arc<HashTable<u32>>,
}

impl<E> Clone for Table<E> {
    fn clone(&self) -> Self {
        Table {
            chunks: self.chunks.clone(),
            index: self.index.clone(),
        }
    }
}

impl<E> Default for Table<E> {
    fn default() -> Self {
        Table {
            chunks: Vec::new(),
            index: Arc::default(),
        }
    }
}

fn entry_at<E: Entry>(chunks: &[Arc<Chunk<E>>], i: u32) -> (&E, &[u8]) {
    let c = &chunks[i as usize / CHUNK];
    (&c.entries[i as usize % CHUNK], &c.text)
}

impl<E: Entry> Table<E> {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    fn find(&self, key: &E::Key) -> Option<u32> {
        self.find_hashed(key, hash(key))
    }

    /// [`Table::find`] given the key's hash (an insert hashes its key once, for the look-up
    /// and the index).
    fn find_hashed(&self, key: &E::Key, h: u64) -> Option<u32> {
        self.index
            .find(h, |&i| {
                let (e, t) = entry_at(&self.chunks, i);
                e.key(t) == key
            })
            .copied()
    }

    pub fn get(&self, key: &E::Key) -> Option<&E::Value> {
        let i = self.find(key)?;
        Some(entry_at(&self.chunks, i).0.value())
    }

    pub fn contains_key(&self, key: &E::Key) -> bool {
        self.find(key).is_some()
    }

    /// Sets the value of `key` (adding the entry when it is new).
    pub fn insert(&mut self, key: &E::Key, value: E::Value) {
        let h = hash(key);
        if let Some(i) = self.find_hashed(key, h) {
            let c = Arc::make_mut(&mut self.chunks[i as usize / CHUNK]);
            *c.entries[i as usize % CHUNK].value_mut() = value;
            return;
        }
        let fits = self.chunks.last().is_some_and(|c| {
            c.entries.len() < CHUNK && c.text.len() + E::key_len(key) <= u32::MAX as usize
        });
        if !fits {
            if let Some(last) = self.chunks.last_mut() {
                // Sealed: no spare capacity is kept behind a full chunk.
                Arc::make_mut(last).text.shrink_to_fit();
            }
            assert!(
                (self.chunks.len() + 1) * CHUNK <= u32::MAX as usize,
                "session table full"
            );
            // Grown as entries come, not sized up front: most sessions are small, and a
            // chunk's full capacity is about 200 KB per table.
            self.chunks.push(Arc::new(Chunk {
                entries: Vec::new(),
                text: Vec::new(),
            }));
        }
        // Entry number i lives in chunk i / CHUNK at i % CHUNK (a chunk sealed early, its
        // arena full, leaves its last numbers unused).
        let i = ((self.chunks.len() - 1) * CHUNK) as u32;
        let c = Arc::make_mut(self.chunks.last_mut().expect("a chunk"));
        let i = i + c.entries.len() as u32;
        let e = E::make(key, value, &mut c.text);
        c.entries.push(e);
        let chunks = &self.chunks;
        Arc::make_mut(&mut self.index).insert_unique(h, i, |&j| {
            let (e, t) = entry_at(chunks, j);
            hash(e.key(t))
        });
    }

    /// Every entry, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&E::Key, &E::Value)> {
        let mut numbers: Vec<u32> = self.index.iter().copied().collect();
        numbers.sort_unstable();
        numbers.into_iter().map(|i| {
            let (e, t) = entry_at(&self.chunks, i);
            (e.key(t), e.value())
        })
    }
}

/// Provenance nodes (or turns) by their string id.
pub struct StrTable<V>(Table<StrEntry<V>>);

impl<V> Clone for StrTable<V> {
    fn clone(&self) -> Self {
        StrTable(self.0.clone())
    }
}

impl<V> Default for StrTable<V> {
    fn default() -> Self {
        StrTable(Table::default())
    }
}

impl<V> std::fmt::Debug for StrTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StrTable({} entries)", self.0.index.len())
    }
}

impl<V: Clone> StrTable<V> {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
    pub fn get(&self, id: &str) -> Option<&V> {
        self.0.get(id.as_bytes())
    }
    pub fn contains_key(&self, id: &str) -> bool {
        self.0.contains_key(id.as_bytes())
    }
    pub fn insert(&mut self, id: &str, value: V) {
        self.0.insert(id.as_bytes(), value)
    }
    /// Every (id, value), in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0
            .iter()
            .map(|(k, v)| (std::str::from_utf8(k).expect("a str key"), v))
    }
}

/// Values by a 128-bit id (a request id).
#[derive(Clone, Default)]
pub(crate) struct IdTable<V>(Table<IdEntry<V>>);

impl<V> std::fmt::Debug for IdTable<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdTable({} entries)", self.0.index.len())
    }
}

fn words(id: u128) -> [u64; 2] {
    [(id >> 64) as u64, id as u64]
}

impl<V: Clone> IdTable<V> {
    pub fn get(&self, id: &u128) -> Option<&V> {
        self.0.get(&words(*id))
    }
    pub fn insert(&mut self, id: u128, value: V) {
        self.0.insert(&words(id), value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_table_holds_about_what_it_stores() {
        // Most sessions are small: a table of a few entries must not reserve a whole chunk
        // (4 096 entries, ~200 KB), which took a scale-20 restart to 3.8x live memory.
        let mut t: StrTable<u64> = StrTable::default();
        for i in 0..3u64 {
            t.insert(&format!("p{i}"), i);
        }
        let reserved: usize = t.0.chunks.iter().map(|c| c.entries.capacity()).sum();
        assert!(reserved <= 16, "{reserved} entries reserved for 3");
    }

    #[test]
    fn strings_and_ids_round_trip_across_chunks_and_clones() {
        let mut t: StrTable<u64> = StrTable::default();
        for i in 0..10_000u64 {
            t.insert(&format!("p{i}"), i);
        }
        let snapshot = t.clone();
        t.insert("p5", 99);
        t.insert("new", 7);
        assert_eq!(t.len(), 10_001);
        assert_eq!(t.get("p5"), Some(&99));
        assert_eq!(snapshot.get("p5"), Some(&5));
        assert_eq!(snapshot.get("new"), None);
        assert_eq!(t.get("p9999"), Some(&9999));
        assert!(t.contains_key("new") && !t.contains_key("p10000"));
        let all: Vec<(String, u64)> = t.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(all.len(), 10_001);
        assert_eq!(all[0], ("p0".to_string(), 0));
        assert_eq!(all[10_000], ("new".to_string(), 7));

        let mut ids: IdTable<u64> = IdTable::default();
        for i in 0..5_000u128 {
            ids.insert(i << 70 | i, i as u64);
        }
        assert_eq!(ids.get(&(7 << 70 | 7)), Some(&7));
        assert_eq!(ids.get(&7), None);
    }
}
