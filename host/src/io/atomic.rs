//! Outputs are written to `.<name>.tmp-<pid>-<n>` beside the target and renamed over it only when
//! complete, so a failed run never leaves a half-written file in place of a good one.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct AtomicFile {
    tmp: PathBuf,
    target: PathBuf,
    writer: Option<BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(target: impl AsRef<Path>) -> std::io::Result<Self> {
        let target = target.as_ref().to_path_buf();
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        // Process id and a per-process counter: two writers of the same target (threads of one
        // process, or processes) never share a temporary file.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = target.with_file_name(format!(".{name}.tmp-{}-{k}", std::process::id()));
        let file = File::create(&tmp)
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {}: {e}", tmp.display())))?;
        Ok(Self { tmp, target, writer: Some(BufWriter::with_capacity(1 << 20, file)) })
    }
    pub fn writer(&mut self) -> &mut BufWriter<File> { self.writer.as_mut().expect("AtomicFile used after commit") }
    /// Flushes, syncs and renames the temporary file over the target.
    pub fn commit(mut self) -> std::io::Result<()> {
        let mut w = self.writer.take().expect("AtomicFile committed twice");
        w.flush()?;
        w.get_ref().sync_all()?;
        drop(w);
        std::fs::rename(&self.tmp, &self.target)
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot rename onto {}: {e}", self.target.display())))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> { self.writer().write(buf) }
    fn flush(&mut self) -> std::io::Result<()> { self.writer().flush() }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.is_some() {
            // Not committed: an error path. Remove the partial file, keep the old target.
            self.writer = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn uncommitted_write_leaves_old_file() {
        let dir = std::env::temp_dir().join(format!("seisgpu-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.bin");
        std::fs::write(&p, b"good").unwrap();
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"half").unwrap();
            // dropped without commit
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"good");
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
