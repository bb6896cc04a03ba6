//! A lock's keys, back to back in one buffer.

/// The resource names of a lock, back to back (one buffer, reused with the record).
#[derive(Debug, Default)]
pub(crate) struct Keys {
    bytes: Vec<u8>,
    /// `ends[i]` is the end of the i-th name.
    ends: Vec<u32>,
}

impl Keys {
    /// The keys `{prefix}{name}` of `names`.
    pub(crate) fn set<S: AsRef<str>>(&mut self, prefix: &str, names: &[S]) {
        self.bytes.clear();
        self.ends.clear();
        for name in names {
            self.bytes.extend_from_slice(prefix.as_bytes());
            self.bytes.extend_from_slice(name.as_ref().as_bytes());
            self.ends.push(self.bytes.len() as u32);
        }
    }

    /// These keys, as they are.
    pub(crate) fn set_bytes<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        self.bytes.clear();
        self.ends.clear();
        for key in keys {
            self.bytes.extend_from_slice(key);
            self.ends.push(self.bytes.len() as u32);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        (0..self.ends.len()).map(move |i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            &self.bytes[start..self.ends[i] as usize]
        })
    }
}
