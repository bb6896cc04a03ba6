//! Clock jumps on a node: the `LD_PRELOAD` shim (`clockshift.c`, kept next to this file and
//! compiled by the suite with `gcc`) and the per-node file that holds each node's shift.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use redlease_servers::TempDir;

/// The shim's C source.
pub const SOURCE: &str = include_str!("clockshift.c");

/// The environment variable naming a node's shift file.
pub const SHIFT_VAR: &str = "REDLEASE_CLOCK_SHIFT_FILE";

/// The compiled shim, in a temporary directory that also holds the shift files.
#[derive(Debug)]
pub struct Shim {
    dir: TempDir,
    lib: PathBuf,
}

impl Shim {
    /// Compile `clockshift.c` with `gcc` into a shared library.
    pub fn build() -> Result<Shim, String> {
        let dir = TempDir::new("redlease-clockshift").map_err(|e| format!("temp dir: {e}"))?;
        let src = dir.path().join("clockshift.c");
        let lib = dir.path().join("libclockshift.so");
        std::fs::write(&src, SOURCE).map_err(|e| format!("{}: {e}", src.display()))?;
        let out = Command::new("gcc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&lib)
            .arg(&src)
            .arg("-ldl")
            .output()
            .map_err(|e| format!("cannot run gcc ({e}): install it with 'apt-get install gcc'"))?;
        if !out.status.success() {
            return Err(format!("gcc failed to build the clock shim:\n{}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(Shim { dir, lib })
    }

    /// The shared library to preload.
    pub fn lib(&self) -> &Path {
        &self.lib
    }

    /// A fresh shift file named `name` (no shift yet).
    pub fn shift_file(&self, name: &str) -> Result<ClockShift, String> {
        let path = self.dir.path().join(format!("shift-{name}"));
        std::fs::write(&path, 0i64.to_ne_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ClockShift { path, shift: Duration::ZERO })
    }
}

/// One node's clock shift: a file of 8 bytes the shim maps; writing it moves the node's wall
/// clock at its next read.
#[derive(Debug)]
pub struct ClockShift {
    path: PathBuf,
    shift: Duration,
}

impl ClockShift {
    /// The file (for the shim's environment variable).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The node's clock is this far ahead.
    pub fn shift(&self) -> Duration {
        self.shift
    }

    /// Move the node's wall clock forward by `by`, at once.
    pub fn jump(&mut self, by: Duration) -> Result<(), String> {
        let shift = self.shift + by;
        let file =
            OpenOptions::new().write(true).open(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        // One aligned 8-byte write: the shim reads the value with one load.
        file.write_all_at(&(shift.as_nanos() as i64).to_ne_bytes(), 0)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.shift = shift;
        Ok(())
    }
}
