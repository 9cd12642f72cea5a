//! The test host: an in-process taskhost with its own runtime and private directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;
use taskhost_abi::PluginModRef;
use taskhost_engine::{LoadOptions, ServiceOptions, Taskhost};
use taskhost_registry::{Agent, Registration, RegistryConfig, SurfaceScope};

use taskhost_registry::TaskSnapshot;

use crate::error::TestkitError;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// Where the plugin under test comes from.
#[derive(Clone)]
enum Source {
    /// A built cdylib.
    File(PathBuf),
    /// Linked into the test binary itself.
    Linked(PluginModRef),
}

/// One in-process host, its own runtime and private directory (removed when it is dropped).
pub struct TestHost {
    host: Arc<Taskhost>,
    dir: PathBuf,
    plugin: Mutex<Option<(Source, Option<String>)>>,
    settlements: Arc<Mutex<HashMap<String, usize>>>,
    _surface: Registration,
    _listener: Registration,
    // Dropped last: the host's completions run on it.
    rt: tokio::runtime::Runtime,
}

impl TestHost {
    /// A fresh host with a control surface attached and no plugin loaded.
    ///
    /// # Errors
    /// [`TestkitError::Setup`] when the runtime or the private directory cannot be made.
    pub fn new() -> Result<Self, TestkitError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let setup = |e: std::io::Error| TestkitError::Setup(e.to_string());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(setup)?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "taskhost-testkit-{}-{n}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(setup)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(setup)?;
        let options = LoadOptions::new(dir.join("gen"));
        let host = Arc::new(Taskhost::new(
            RegistryConfig::new(),
            rt.handle().clone(),
            options,
            ServiceOptions::default(),
        ));
        let surface = host
            .registry()
            .attach_surface("testkit", SurfaceScope::Global);
        let settlements: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let counted = settlements.clone();
        let listener =
            host.registry()
                .on_task_done(Arc::new(move |s: &TaskSnapshot, _: Option<&Agent>| {
                    *counted.lock().entry(s.id.to_string()).or_default() += 1;
                }));
        Ok(Self {
            host,
            dir,
            plugin: Mutex::new(None),
            settlements,
            _surface: surface,
            _listener: listener,
            rt,
        })
    }

    /// The host itself, for what the test host does not wrap.
    pub fn host(&self) -> &Taskhost {
        &self.host
    }

    /// Loads the plugin file at `path` (its first generation, or a new one). Returns the generation's
    /// number.
    ///
    /// # Errors
    /// [`TestkitError::Load`] with the loader's reason (trust, ELF, ABI, init).
    pub fn load(&self, path: impl AsRef<Path>) -> Result<u64, TestkitError> {
        self.load_with(path.as_ref(), None)
    }

    /// Loads the plugin with `config` as its `[plugin.config]` table.
    ///
    /// # Errors
    /// As [`TestHost::load`].
    pub fn load_with_config(
        &self,
        path: impl AsRef<Path>,
        config: &Value,
    ) -> Result<u64, TestkitError> {
        self.load_with(path.as_ref(), Some(config.to_string()))
    }

    fn load_with(&self, path: &Path, config: Option<String>) -> Result<u64, TestkitError> {
        let generation = self.host.plugins().load(path, config.clone(), false)?;
        *self.plugin.lock() = Some((Source::File(path.to_path_buf()), config));
        Ok(generation.map_or(0, |g| g.number()))
    }

    /// Loads a plugin linked into the test binary: a plugin crate's own unit tests pass
    /// `crate::__taskhost_root_module()` (written by `export_plugin!`), and its tools run on this
    /// real host in-process without a cdylib being built. [`TestHost::reload`] loads it again as a
    /// new generation. Returns the generation's number.
    ///
    /// # Errors
    /// [`TestkitError::Load`] when its init fails or a tool clashes.
    pub fn load_linked(&self, module: PluginModRef) -> Result<u64, TestkitError> {
        self.load_linked_with(module, None)
    }

    /// [`TestHost::load_linked`] with `config` as the plugin's `[plugin.config]` table.
    ///
    /// # Errors
    /// As [`TestHost::load_linked`].
    pub fn load_linked_with_config(
        &self,
        module: PluginModRef,
        config: &Value,
    ) -> Result<u64, TestkitError> {
        self.load_linked_with(module, Some(config.to_string()))
    }

    fn load_linked_with(
        &self,
        module: PluginModRef,
        config: Option<String>,
    ) -> Result<u64, TestkitError> {
        let generation = self.host.plugins().load_linked(module, config.clone())?;
        *self.plugin.lock() = Some((Source::Linked(module), config));
        Ok(generation.number())
    }

    /// Loads the last loaded plugin file again, as a new generation swapped in for the serving one
    /// (what a rebuild under a watching host does). Returns the new generation's number.
    ///
    /// # Errors
    /// [`TestkitError::NothingLoaded`], or as [`TestHost::load`].
    pub fn reload(&self) -> Result<u64, TestkitError> {
        let (source, config) = self
            .plugin
            .lock()
            .clone()
            .ok_or(TestkitError::NothingLoaded)?;
        match source {
            Source::File(path) => self.load_with(&path, config),
            Source::Linked(module) => self.load_linked_with(module, config),
        }
    }

    /// Opens a session (an MCP client's), the owner of the tasks its calls start.
    pub fn open_session(&self, name: &str) {
        self.host.sessions().open(name);
    }

    /// Closes a session: its tasks are cancelled and awaited, as when a client disconnects.
    pub fn close_session(&self, name: &str) {
        self.rt.block_on(self.host.close_session(name));
    }

    /// The names of the tools served now, sorted.
    pub fn tools(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .host
            .plugins()
            .tools()
            .into_iter()
            .map(|t| t.name)
            .collect();
        names.sort();
        names
    }

    /// Calls a tool as `session`: `Ok` with the result's text, `Err` with an error result's text (or
    /// why the call reached no plugin).
    ///
    /// # Errors
    /// The error text.
    pub fn call(&self, session: &str, tool: &str, args: Value) -> Result<String, String> {
        match self
            .rt
            .block_on(self.host.plugins().call_tool(tool, session, &args))
        {
            Ok(out) if out.is_error => Err(out.text),
            Ok(out) => Ok(out.text),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Calls a tool that starts a background task, and returns the id of the task it reported
    /// (`ToolResult::started`: what MCP Tasks and clients act on; its text is not read).
    ///
    /// # Errors
    /// [`TestkitError::NoTaskStarted`] with what the tool answered, when it reported no task.
    pub fn start(&self, session: &str, tool: &str, args: Value) -> Result<String, TestkitError> {
        let out = self
            .rt
            .block_on(self.host.plugins().call_tool(tool, session, &args));
        match out {
            Ok(out) => out.started.ok_or(TestkitError::NoTaskStarted {
                tool: tool.to_owned(),
                text: out.text,
            }),
            Err(e) => Err(TestkitError::NoTaskStarted {
                tool: tool.to_owned(),
                text: e.to_string(),
            }),
        }
    }

    /// Starts `command` (bash) as a background process task of kind `kind` owned by `session`, as
    /// the bash plugin would: for testing a plugin that reads, waits on or kills tasks.
    ///
    /// # Errors
    /// The registry's refusal or the spawn's failure, as text.
    pub fn start_process(
        &self,
        session: &str,
        kind: &str,
        command: &str,
    ) -> Result<String, String> {
        let decl = taskhost_engine::services::TaskDeclaration {
            kind: kind.to_owned(),
            label: command.to_owned(),
            output_limit_bytes: None,
            owner_session: Some(session.to_owned()),
            after: Vec::new(),
        };
        self.host
            .services()
            .start_process(&decl, taskhost_engine::process::ProcessSpec::new(command))
            .map_err(String::from)
    }

    /// The notices waiting for `session` (a plugin's `Host::notify`), taken.
    pub fn notices(&self, session: &str) -> Vec<String> {
        self.host.sessions().take_notices(session)
    }

    /// The input schema of tool `name`, if it is served.
    pub fn schema(&self, name: &str) -> Option<Value> {
        self.host
            .plugins()
            .tools()
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| (*t.input_schema).clone())
    }

    /// The session's tasks and the unowned ones.
    pub fn list(&self, session: &str) -> Vec<TaskSnapshot> {
        let agent = self.host.sessions().agent(session);
        self.host.registry().list(agent.as_ref())
    }

    /// Reads a task as `session` (consuming, for stream kinds): its text and its snapshot.
    ///
    /// # Errors
    /// The registry's refusal.
    pub fn read(&self, session: &str, id: &str) -> Result<(String, TaskSnapshot), TestkitError> {
        let agent = self.host.sessions().agent(session);
        let read = self.host.registry().read(id, agent.as_ref())?;
        Ok((read.text, read.snapshot))
    }

    /// Reads a task until it settles: all its output (for a final-output kind, its result) and its
    /// final snapshot.
    ///
    /// # Errors
    /// [`TestkitError::Timeout`] when it has not settled within `timeout`; the registry's refusal.
    pub fn read_to_end(
        &self,
        session: &str,
        id: &str,
        timeout: Duration,
    ) -> Result<(String, TaskSnapshot), TestkitError> {
        let deadline = Instant::now() + timeout;
        let mut all = String::new();
        loop {
            let (text, snapshot) = self.read(session, id)?;
            all.push_str(&text);
            if snapshot.status.is_terminal() {
                return Ok((all, snapshot));
            }
            if Instant::now() > deadline {
                return Err(TestkitError::Timeout(format!(
                    "task {id} did not settle within {timeout:?} ({} bytes read)",
                    all.len()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How many times the registry announced task `id` settled (0 while it runs; never more than 1).
    pub fn settled_count(&self, id: &str) -> usize {
        self.settlements.lock().get(id).copied().unwrap_or(0)
    }

    /// Checks that no task settled more than once.
    ///
    /// # Errors
    /// The tasks that did, with their counts.
    pub fn check_settled_once(&self) -> Result<(), String> {
        let twice: Vec<String> = self
            .settlements
            .lock()
            .iter()
            .filter(|&(_, &n)| n > 1)
            .map(|(id, n)| format!("{id} settled {n} times"))
            .collect();
        if twice.is_empty() {
            Ok(())
        } else {
            Err(twice.join(", "))
        }
    }

    /// The generation files of this host mapped in the process now.
    pub fn mapped_generations(&self) -> Vec<PathBuf> {
        taskhost_engine::plugin::mapped::mapped_generations(&self.dir.join("gen"))
    }

    /// Waits until only the serving generation of each loaded plugin is mapped: every retired one
    /// was really unloaded (its threads joined, its library closed).
    ///
    /// # Errors
    /// [`TestkitError::Timeout`] naming the generations still mapped.
    pub fn wait_unmapped(&self, timeout: Duration) -> Result<(), TestkitError> {
        let serving = self.host.plugins().paths().len();
        let deadline = Instant::now() + timeout;
        loop {
            let mapped = self.mapped_generations();
            if mapped.len() <= serving {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(TestkitError::Timeout(format!(
                    "{} generations still mapped after {timeout:?} (serving {serving}): {}",
                    mapped.len(),
                    mapped
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        self.rt.block_on(self.host.shutdown());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
