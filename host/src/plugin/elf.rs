//! Reading a plugin file's ELF headers without loading it: whether it is whole (a truncated library
//! would SIGBUS inside `dlopen`), and its GNU build id.

use std::fs;

/// Checks that `bytes` is a whole 64-bit little-endian ELF shared object: every program segment and the
/// section table lie inside the file. `dlopen` of a truncated library maps segments past the end of
/// the file and dies of SIGBUS when it touches them, so a file still being written must be caught here.
pub(crate) fn check_elf(bytes: &[u8], file_len: u64) -> Result<(), String> {
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u64)
    };
    let u64_at = |o: usize| {
        bytes
            .get(o..o + 8)
            .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    };
    let len = file_len;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file".to_owned());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".to_owned());
    }
    if u16_at(16) != Some(3) {
        return Err("not a shared object (ELF type is not ET_DYN)".to_owned());
    }
    let field = |v: Option<u64>| v.ok_or_else(|| "truncated ELF header".to_owned());
    let (phoff, phentsize, phnum) = (field(u64_at(32))?, field(u16_at(54))?, field(u16_at(56))?);
    let (shoff, shentsize, shnum) = (field(u64_at(40))?, field(u16_at(58))?, field(u16_at(60))?);
    let within = |off: u64, size: u64| off.checked_add(size).is_some_and(|end| end <= len);
    if !within(phoff, phentsize * phnum) || !within(shoff, shentsize * shnum) {
        return Err(format!(
            "truncated: the file ends at byte {len}, before its header tables"
        ));
    }
    if phoff + phentsize * phnum > bytes.len() as u64 {
        return Err("the program headers lie beyond the first 64 KiB".to_owned());
    }
    for i in 0..phnum {
        let ph = (phoff + i * phentsize) as usize;
        let (offset, filesz) = (field(u64_at(ph + 8))?, field(u64_at(ph + 32))?);
        if !within(offset, filesz) {
            return Err(format!(
                "truncated: segment {i} ends past the end of the file (byte {len})"
            ));
        }
    }
    Ok(())
}

/// The GNU build id of an open ELF file (the linker's hash of its output), when its notes lie in the
/// first 4 KiB, where linkers put them. `None` for a file without one (or unreadable).
pub(crate) fn build_id_of(file: &fs::File) -> Option<Vec<u8>> {
    let (head, _) = read_head(file, 4096).ok()?;
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?) as usize);
    if head.get(..4) != Some(b"\x7fELF") || head.get(4..6) != Some(&[2, 1]) {
        return None;
    }
    let (phoff, phentsize, phnum) = (u64_at(32)?, u16_at(54)?, u16_at(56)?);
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        const PT_NOTE: usize = 4;
        if u32_at(ph)? != PT_NOTE {
            continue;
        }
        let (start, size) = (u64_at(ph + 8)?, u64_at(ph + 32)?);
        let mut at = start;
        while at.checked_add(12)? <= start.checked_add(size)? {
            let (namesz, descsz, kind) = (u32_at(at)?, u32_at(at + 4)?, u32_at(at + 8)?);
            let name = at + 12;
            let desc = name + namesz.next_multiple_of(4);
            const NT_GNU_BUILD_ID: usize = 3;
            if kind == NT_GNU_BUILD_ID && head.get(name..name + namesz)? == b"GNU\0" {
                return head
                    .get(desc..desc.checked_add(descsz)?)
                    .map(<[u8]>::to_vec);
            }
            at = desc.checked_add(descsz.next_multiple_of(4))?;
        }
    }
    None
}

/// The first `max` bytes of an open file (fewer if it is shorter), and its length; the file's offset
/// is not used.
pub(crate) fn read_head(file: &fs::File, max: usize) -> std::io::Result<(Vec<u8>, u64)> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut head = vec![0; max.min(usize::try_from(len).unwrap_or(max))];
    file.read_exact_at(&mut head, 0)?;
    Ok((head, len))
}

#[cfg(test)]
mod tests {
    use super::build_id_of;
    use std::fs;

    #[test]
    fn the_build_id_is_read_from_the_notes_and_changes_only_with_them() {
        // This test binary is an ELF file linked like a plugin, with a GNU build id note.
        let exe = std::env::current_exe().expect("test binary");
        let id =
            build_id_of(&fs::File::open(&exe).unwrap()).expect("the test binary has a build id");
        assert!(id.len() >= 16, "{id:?}");
        let mut bytes = std::fs::read(&exe).expect("read");
        let at = bytes
            .windows(id.len())
            .take(4096)
            .position(|w| w == id.as_slice())
            .expect("the id lies in the first 4 KiB");
        let dir = std::env::temp_dir().join(format!("taskhost-build-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).expect("write");
            build_id_of(&fs::File::open(&p).unwrap())
        };
        let len = bytes.len();
        bytes[len - 1] ^= 1;
        assert_eq!(
            write("tail", &bytes).as_ref(),
            Some(&id),
            "a byte past the notes"
        );
        bytes[at] ^= 1;
        let changed = write("changed", &bytes).expect("still an id");
        assert_ne!(changed, id);
        assert_eq!(write("text", b"not an ELF file"), None);
        assert_eq!(write("short", &bytes[..100]), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
