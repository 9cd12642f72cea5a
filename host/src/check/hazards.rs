//! What in a plugin file can keep its library mapped after `dlclose`, read from its ELF dynamic
//! section and dynamic symbols (the loader's own reasons; glibc's rules).

use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::{Endianness, Object, ObjectSymbol, elf};

/// The unload hazards of one library file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Hazards {
    /// It imports `__cxa_thread_atexit_impl`: it registers thread-local destructors, and glibc keeps a
    /// library mapped while a thread that ran one of its registrations is alive.
    pub tls_destructors: bool,
    /// Its `STB_GNU_UNIQUE` symbols: glibc never unloads a library that defines one.
    pub unique_symbols: Vec<String>,
    /// Its `DT_FLAGS_1` has `DF_1_NODELETE` (linked with `-z nodelete`): never unloaded.
    pub nodelete: bool,
}

/// Reads the hazards of the ELF file `bytes`.
///
/// # Errors
/// Why the file could not be read as a 64-bit ELF file.
pub fn hazards(bytes: &[u8]) -> Result<Hazards, String> {
    let file = ElfFile64::<Endianness>::parse(bytes).map_err(|e| e.to_string())?;
    let mut found = Hazards::default();
    for symbol in file.dynamic_symbols() {
        let name = symbol.name().unwrap_or_default();
        if symbol.is_undefined() && name == "__cxa_thread_atexit_impl" {
            found.tls_destructors = true;
        }
        if !symbol.is_undefined() && symbol.elf_symbol().st_bind() == elf::STB_GNU_UNIQUE {
            found.unique_symbols.push(name.to_owned());
        }
    }
    let endian = file.endian();
    let sections = file
        .elf_header()
        .sections(endian, bytes)
        .map_err(|e| e.to_string())?;
    if let Some((entries, _)) = sections.dynamic(endian, bytes).map_err(|e| e.to_string())? {
        found.nodelete = entries.iter().any(|d| {
            d.tag32(endian) == Some(elf::DT_FLAGS_1)
                && d.val32(endian).unwrap_or(0) & elf::DF_1_NODELETE != 0
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::hazards;

    #[test]
    fn a_non_elf_file_is_an_error() {
        assert!(hazards(b"not an ELF file").is_err());
    }
}
