//! Watching plugin files: a debounced watch on each plugin's directory (a watch on the file itself
//! dies with cargo's first rebuild), one reload per build.
