//! Threads a plugin starts on its own: a C library it links, or `std::thread::spawn` against the
//! rules (plugin code is meant to run on `Host::spawn_worker` threads, which the host joins). Such a
//! thread runs the plugin's code after its generation is retired; if the library were closed under
//! it, the host would die of SIGSEGV the moment the thread next ran (a test did exactly that: a C
//! thread sleeping across two reloads).
//!
//! The `taskhost` binary exports `pthread_create` (see `main.rs` and `build.rs`), so the dynamic
//! linker binds every plugin's call to it and it comes here ([`create`]). A thread whose start routine
//! lies in a loaded plugin's code holds that plugin's libraries (`loader::Libraries`) until it has
//! ended (its stack and every destructor of it run): only then can the generation's `dlclose` happen.
//! Other threads pass straight through. Where the symbol is not exported (a plugin's in-process unit
//! tests, the testkit), nothing is interposed and nothing changes.
//!
//! The hold is released when the thread's task entry in `/proc/self/task` is gone: the start routine
//! returning is not enough, since glibc runs the thread's `pthread_key` destructors (plugin code)
//! after it.

use std::ffi::{c_int, c_void};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};
use std::time::Duration;

/// What keeps a plugin's library open while it lives (the loader's handles).
pub(crate) type Hold = Arc<dyn std::any::Any + Send + Sync>;

/// A thread's start routine, as `pthread_create` takes it.
pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> c_int;

/// The executable segments of one loaded plugin library, and the libraries they belong to.
struct Tracked {
    code: Vec<(usize, usize)>,
    libraries: Weak<dyn std::any::Any + Send + Sync>,
}

static TRACKED: RwLock<Vec<Tracked>> = RwLock::new(Vec::new());

/// Records where `libraries`' code is mapped: the executable segments of the object that contains
/// `address` (an address inside the library, such as one of its functions). Entries of libraries
/// already closed are dropped on the way.
pub(crate) fn track(libraries: &Hold, address: usize) {
    let code = executable_segments(address);
    if code.is_empty() {
        tracing::warn!(
            address,
            "no loaded object contains the plugin's root module"
        );
        return;
    }
    let mut tracked = TRACKED.write().unwrap_or_else(PoisonError::into_inner);
    tracked.retain(|t| t.libraries.strong_count() > 0);
    tracked.push(Tracked {
        code,
        libraries: Arc::downgrade(libraries),
    });
}

/// The libraries whose code contains `address`, if a loaded plugin's does.
fn libraries_at(address: usize) -> Option<Hold> {
    let tracked = TRACKED.read().unwrap_or_else(PoisonError::into_inner);
    tracked
        .iter()
        .find(|t| t.code.iter().any(|&(lo, hi)| (lo..hi).contains(&address)))
        .and_then(|t| t.libraries.upgrade())
}

/// The `[start, end)` ranges of the executable `PT_LOAD` segments of the object containing `address`.
fn executable_segments(address: usize) -> Vec<(usize, usize)> {
    struct Search {
        address: usize,
        found: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Search` passed to `dl_iterate_phdr` below, alive for its whole call;
        // `info` and its program headers are valid for the duration of this callback.
        let (search, info) = unsafe { (&mut *data.cast::<Search>(), &*info) };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: glibc gives `dlpi_phnum` headers at `dlpi_phdr`.
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let base = info.dlpi_addr as usize;
        let loads = headers.iter().filter(|h| h.p_type == libc::PT_LOAD);
        let ranges = |pick: fn(&libc::Elf64_Phdr) -> bool| {
            loads
                .clone()
                .filter(move |h| pick(h))
                .map(move |h| {
                    let lo = base.wrapping_add(h.p_vaddr as usize);
                    (lo, lo.wrapping_add(h.p_memsz as usize))
                })
                .collect::<Vec<_>>()
        };
        if ranges(|_| true)
            .iter()
            .any(|&(lo, hi)| (lo..hi).contains(&search.address))
        {
            search.found = ranges(|h| h.p_flags & libc::PF_X != 0);
            return 1;
        }
        0
    }
    let mut search = Search {
        address,
        found: Vec::new(),
    };
    // SAFETY: `visit` only reads what glibc hands it and writes `search`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast()) };
    search.found
}

/// libc's own `pthread_create`, the next definition after the executable's.
fn real_create() -> Option<PthreadCreate> {
    static REAL: OnceLock<usize> = OnceLock::new();
    let address = *REAL.get_or_init(|| {
        // SAFETY: a lookup by a NUL-terminated name; RTLD_NEXT skips the executable's own definition.
        unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) as usize }
    });
    // SAFETY: a non-null `pthread_create` found by the dynamic linker has exactly this signature.
    (address != 0).then(|| unsafe { std::mem::transmute::<usize, PthreadCreate>(address) })
}

/// What a plugin's thread runs first: its own start routine, with its libraries held.
struct Start {
    routine: StartRoutine,
    argument: *mut c_void,
    libraries: Hold,
}

/// `pthread_create`, for the `taskhost` binary's exported definition: a thread whose start routine is
/// a loaded plugin's code holds that plugin's libraries until it has ended; any other passes through.
///
/// # Safety
/// The arguments are `pthread_create`'s, with its contract.
pub unsafe fn create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    argument: *mut c_void,
) -> c_int {
    let Some(real) = real_create() else {
        return libc::ENOSYS;
    };
    let Some(libraries) = libraries_at(routine as usize) else {
        // SAFETY: the caller's arguments, passed on unchanged.
        return unsafe { real(thread, attr, routine, argument) };
    };
    tracing::warn!(
        "a plugin started a thread of its own; its generation stays loaded until the thread ends (plugin code should run on Host::spawn_worker threads)"
    );
    let start = Box::into_raw(Box::new(Start {
        routine,
        argument,
        libraries,
    }));
    // SAFETY: the caller's thread and attributes; `trampoline` takes ownership of `start`.
    let rc = unsafe { real(thread, attr, trampoline, start.cast()) };
    if rc != 0 {
        // SAFETY: the thread was not created, so `start` is still ours.
        drop(unsafe { Box::from_raw(start) });
    }
    rc
}

extern "C" fn trampoline(start: *mut c_void) -> *mut c_void {
    // SAFETY: `create` passed a `Box<Start>` it gave up.
    let start = unsafe { Box::from_raw(start.cast::<Start>()) };
    let Start {
        routine,
        argument,
        libraries,
    } = *start;
    // Held as a raw pointer: a `pthread_exit` unwinding this frame leaks the hold (the library stays
    // mapped) instead of running a destructor mid-unwind.
    let held = Arc::into_raw(libraries);
    let result = routine(argument);
    // SAFETY: `held` came from `Arc::into_raw` above and is released once.
    release_when_gone(gettid(), unsafe { Arc::from_raw(held) });
    result
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// A plugin's thread whose start routine returned (its id), and its hold on the plugin's code.
type Finished = (i32, Hold);

/// Hands a finished thread's hold to the reaper, which drops it once the thread is gone.
fn release_when_gone(tid: i32, libraries: Hold) {
    static REAPER: OnceLock<Mutex<Option<Sender<Finished>>>> = OnceLock::new();
    let sender = REAPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("taskhost-threads".into())
            .spawn(move || reap(&rx));
        Mutex::new(spawned.is_ok().then_some(tx))
    });
    let sender = sender.lock().unwrap_or_else(PoisonError::into_inner);
    let unsent = match sender.as_ref() {
        Some(tx) => tx.send((tid, libraries)).err().map(|e| e.0.1),
        None => Some(libraries),
    };
    // No reaper: the library stays mapped for good, which is safe.
    std::mem::forget(unsent);
}

/// Drops each hold once its thread no longer exists.
fn reap(finished: &Receiver<Finished>) {
    let mut waiting: Vec<Finished> = Vec::new();
    loop {
        if waiting.is_empty() {
            match finished.recv() {
                Ok(next) => waiting.push(next),
                Err(_) => return,
            }
        } else if let Ok(next) = finished.recv_timeout(Duration::from_millis(2)) {
            waiting.push(next);
        }
        waiting.retain(|(tid, _)| std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
    }
}
