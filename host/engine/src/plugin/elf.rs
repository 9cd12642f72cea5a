//! Reading a plugin file's ELF headers without loading it: whether it is whole (a truncated library
//! would SIGBUS inside `dlopen`), and its GNU build id.

use object::LittleEndian as LE;
use object::elf::{ELF_NOTE_GNU, ELFCLASS64, ELFDATA2LSB, ET_DYN, FileHeader64, NT_GNU_BUILD_ID};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader};
use std::fs;

/// The header of a 64-bit little-endian ELF file at the start of `bytes`, or why it is not one.
fn header64(bytes: &[u8]) -> Result<&FileHeader64<LE>, &'static str> {
    let header = FileHeader64::<LE>::parse(bytes).map_err(|_| "not an ELF file")?;
    let ident = header.e_ident();
    if ident.class != ELFCLASS64 || ident.data != ELFDATA2LSB {
        return Err("not a 64-bit little-endian ELF file");
    }
    Ok(header)
}

/// Checks that `bytes` is a whole 64-bit little-endian ELF shared object: every program segment and the
/// section table lie inside the file. `dlopen` of a truncated library maps segments past the end of
/// the file and dies of SIGBUS when it touches them, so a file still being written must be caught here.
pub(crate) fn check_elf(bytes: &[u8], file_len: u64) -> Result<(), String> {
    let header = header64(bytes)?;
    if header.e_type(LE) != ET_DYN {
        return Err("not a shared object (ELF type is not ET_DYN)".to_owned());
    }
    let len = file_len;
    let within = |off: u64, size: u64| off.checked_add(size).is_some_and(|end| end <= len);
    let table = |off: u64, entsize: u16, num: u16| within(off, u64::from(entsize) * u64::from(num));
    let (phoff, phentsize, phnum) = (
        header.e_phoff(LE),
        header.e_phentsize(LE),
        header.e_phnum(LE),
    );
    if !table(phoff, phentsize, phnum)
        || !table(
            header.e_shoff(LE),
            header.e_shentsize(LE),
            header.e_shnum(LE),
        )
    {
        return Err(format!(
            "truncated: the file ends at byte {len}, before its header tables"
        ));
    }
    let segments = header
        .program_headers(LE, bytes)
        .map_err(|_| "the program headers lie beyond the first 64 KiB".to_owned())?;
    for (i, segment) in segments.iter().enumerate() {
        if !within(segment.p_offset(LE), segment.p_filesz(LE)) {
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
    let header = header64(&head).ok()?;
    for segment in header.program_headers(LE, head.as_slice()).ok()? {
        if segment.p_type(LE) != object::elf::PT_NOTE {
            continue;
        }
        // The part of the segment inside the head: a note cut off at its end ends the walk.
        let start = usize::try_from(segment.p_offset(LE)).ok()?;
        let end = start.saturating_add(usize::try_from(segment.p_filesz(LE)).ok()?);
        let Some(data) = head.get(start..end.min(head.len())) else {
            continue;
        };
        let Ok(mut notes) = NoteIterator::<FileHeader64<LE>>::new(LE, segment.p_align(LE), data)
        else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.n_type(LE) == NT_GNU_BUILD_ID && note.name() == ELF_NOTE_GNU {
                return Some(note.desc().to_vec());
            }
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
    use super::{build_id_of, check_elf, read_head};
    use std::fs;

    #[test]
    fn a_whole_shared_object_passes_and_a_cut_or_foreign_one_is_named() {
        // This test binary is position-independent: an ELF shared object, as a plugin is.
        let exe = fs::File::open(std::env::current_exe().expect("test binary")).expect("open");
        let (head, len) = read_head(&exe, 64 * 1024).expect("read");
        assert_eq!(check_elf(&head, len), Ok(()));
        let cut = check_elf(&head, 4096).expect_err("a file cut at 4 KiB");
        assert!(cut.starts_with("truncated:"), "{cut}");
        let mut big_endian = head.clone();
        big_endian[5] = 2;
        assert_eq!(
            check_elf(&big_endian, len).expect_err("big-endian"),
            "not a 64-bit little-endian ELF file"
        );
        let mut executable = head.clone();
        executable[16] = 2;
        assert!(
            check_elf(&executable, len)
                .expect_err("ET_EXEC")
                .contains("ET_DYN")
        );
        assert_eq!(
            check_elf(b"#!/bin/sh", 9),
            Err("not an ELF file".to_owned())
        );
    }

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
