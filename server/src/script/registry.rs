//! The compiled function libraries: what each library registered while it loaded.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use ferrokv::Reply;
use mlua::{Function, RegistryKey};

/// A function a library registered while it loaded.
pub struct Registered {
    pub(super) name: String,
    pub(super) func: Function,
    pub(super) flags: u32,
    pub(super) description: Option<Vec<u8>>,
}

/// A compiled function.
pub(super) struct Entry {
    /// As registered (FCALL finds it by its lower-cased name).
    pub(super) name: String,
    pub(super) library: String,
    /// In the Lua registry rather than held as a handle: mlua keeps each live handle in a
    /// slot of a Lua stack, which Lua 5.1 caps at 8,000.
    pub(super) func: RegistryKey,
    pub(super) flags: u32,
    pub(super) description: Option<Vec<u8>>,
}

/// The compiled libraries: function names (lower-cased) to functions, and each library's
/// functions in registration order.
#[derive(Default)]
pub struct Registry {
    pub(super) functions: HashMap<String, Entry>,
    pub(super) libraries: BTreeMap<String, Vec<String>>,
    /// The FCALL running now (FUNCTION STATS): its function and arguments.
    pub(super) running: Option<(String, Vec<Vec<u8>>, Instant)>,
}

impl Registry {
    pub fn flags(&self, function: &str) -> Option<u32> {
        self.functions.get(&function.to_ascii_lowercase()).map(|e| e.flags)
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    pub fn library_count(&self) -> usize {
        self.libraries.len()
    }

    /// Bytes the registry itself takes beside the interpreter (INFO used_memory_functions):
    /// names, descriptions and the entries.
    pub fn memory(&self) -> usize {
        let entries: usize = self
            .functions
            .iter()
            .map(|(k, e)| k.len() + e.name.len() + e.library.len() + e.description.as_ref().map_or(0, Vec::len))
            .sum();
        let libraries: usize =
            self.libraries.iter().map(|(k, v)| k.len() + v.iter().map(String::len).sum::<usize>()).sum();
        entries + libraries + (self.functions.len() + self.libraries.len()) * std::mem::size_of::<Entry>()
    }

    /// Add a compiled library, replacing one of the same name; `keep` puts each function
    /// in its interpreter's registry. Err (and nothing changed) when one of its functions
    /// belongs to another library.
    pub(super) fn add(
        &mut self,
        library: &str,
        registered: Vec<Registered>,
        keep: impl Fn(Function) -> Result<RegistryKey, Reply>,
    ) -> Result<(), Reply> {
        for r in &registered {
            if let Some(e) = self.functions.get(&r.name.to_ascii_lowercase()) {
                if e.library != library {
                    return Err(Reply::error(format!("ERR Function {} already exists", r.name)));
                }
            }
        }
        let mut entries = Vec::with_capacity(registered.len());
        for r in registered {
            let func = keep(r.func)?;
            entries.push(Entry {
                name: r.name,
                library: library.to_string(),
                func,
                flags: r.flags,
                description: r.description,
            });
        }
        self.remove(library);
        let names = entries.iter().map(|e| e.name.to_ascii_lowercase()).collect();
        for entry in entries {
            self.functions.insert(entry.name.to_ascii_lowercase(), entry);
        }
        self.libraries.insert(library.to_string(), names);
        Ok(())
    }

    pub(super) fn remove(&mut self, library: &str) -> bool {
        match self.libraries.remove(library) {
            Some(names) => {
                for n in names {
                    self.functions.remove(&n);
                }
                true
            }
            None => false,
        }
    }
}
