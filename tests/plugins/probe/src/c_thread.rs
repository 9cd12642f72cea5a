//! A thread started the way a C library linked into a plugin starts one: `pthread_create` with a C
//! start routine, no Rust runtime on it, so nothing of it (no thread-local destructor) makes glibc
//! keep the library mapped. Only the host can know to keep the generation's code loaded until it ends.

use std::ffi::c_void;

/// Starts a thread that sleeps in 1 ms steps for `ms` milliseconds, then returns.
pub fn start(ms: u64) -> Result<(), String> {
    let mut thread: libc::pthread_t = 0;
    #[expect(
        unsafe_code,
        reason = "the fixture imitates a C library: a raw pthread whose start routine is this library's code"
    )]
    // SAFETY: `thread` is a valid out pointer, null attributes are the defaults, and the argument is
    // a plain integer smuggled in the pointer, never dereferenced.
    let rc = unsafe {
        libc::pthread_create(
            &mut thread,
            std::ptr::null(),
            sleeper,
            usize::try_from(ms).unwrap_or(usize::MAX) as *mut c_void,
        )
    };
    if rc != 0 {
        return Err(format!("pthread_create failed: {rc}"));
    }
    #[expect(unsafe_code, reason = "the raw thread is never joined")]
    // SAFETY: `thread` was just created and is neither joined nor detached elsewhere.
    unsafe {
        libc::pthread_detach(thread);
    }
    Ok(())
}

extern "C" fn sleeper(ms: *mut c_void) -> *mut c_void {
    let step = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    for _ in 0..ms as usize {
        #[expect(unsafe_code, reason = "a C thread sleeps without the Rust runtime")]
        // SAFETY: `step` is a valid timespec and a null remainder is allowed.
        unsafe {
            libc::nanosleep(&step, std::ptr::null_mut());
        }
    }
    std::ptr::null_mut()
}
