//! `rdbtool diff A B`: semantic comparison of two datasets (placeholder, being built).

use crate::out::ToolError;

/// Arguments of `rdbtool diff`.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// First RDB file.
    pub a: std::path::PathBuf,
    /// Second RDB file.
    pub b: std::path::PathBuf,
}

/// Run the command; Ok(exit code) (0 same, 1 different).
pub fn run_cli(_args: DiffArgs) -> Result<u8, ToolError> {
    Err(ToolError::Usage("diff is not implemented yet".into()))
}
