//! The HSA runtime's C API, loaded with `dlopen`: its handles, the calls
//! kpack-get makes and the walk over GPU agents and their ISAs. Runs in
//! the probe child ([`probe_in_process`]).

use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};

use libloading::Library;

use super::{HsaAgent, HsaError, DEFAULT_ROCM_LIBRARY_DIR, LIBRARY_NAME};

// The C interface, as in hsa.h and hsa_ext_amd.h.

/// Longer ISA names than this are taken as a broken runtime.
const ISA_NAME_LIMIT: u32 = 4096;

type Status = u32;
const HSA_STATUS_SUCCESS: Status = 0;
const HSA_STATUS_INFO_BREAK: Status = 1;
const HSA_STATUS_ERROR: Status = 0x1000;
pub(crate) const HSA_STATUS_ERROR_OUT_OF_RESOURCES: Status = 0x1008;

const HSA_AGENT_INFO_NAME: u32 = 0;
const HSA_AGENT_INFO_DEVICE: u32 = 17;
const HSA_AMD_AGENT_INFO_PRODUCT_NAME: u32 = 0xA009;
const HSA_DEVICE_TYPE_GPU: u32 = 1;
const HSA_ISA_INFO_NAME_LENGTH: u32 = 0;
const HSA_ISA_INFO_NAME: u32 = 1;

/// HSA writes at most 64 bytes for name attributes; the buffer is larger
/// so that a runtime writing more does no harm.
const NAME_BUFFER: usize = 256;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct AgentHandle {
    handle: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct IsaHandle {
    handle: u64,
}

type AgentCallback = unsafe extern "C" fn(AgentHandle, *mut c_void) -> Status;
type IsaCallback = unsafe extern "C" fn(IsaHandle, *mut c_void) -> Status;

/// The HSA functions the probe calls.
#[derive(Debug, Clone, Copy)]
struct Api {
    init: unsafe extern "C" fn() -> Status,
    shut_down: unsafe extern "C" fn() -> Status,
    iterate_agents: unsafe extern "C" fn(AgentCallback, *mut c_void) -> Status,
    agent_get_info: unsafe extern "C" fn(AgentHandle, u32, *mut c_void) -> Status,
    agent_iterate_isas: unsafe extern "C" fn(AgentHandle, IsaCallback, *mut c_void) -> Status,
    isa_get_info_alt: unsafe extern "C" fn(IsaHandle, u32, *mut c_void) -> Status,
    status_string: unsafe extern "C" fn(Status, *mut *const c_char) -> Status,
}

impl Api {
    /// Resolves the functions in a loaded runtime.
    fn resolve(library: &'static Library, path: &Path) -> Result<Api, HsaError> {
        fn symbol<T: Copy>(
            library: &'static Library,
            path: &Path,
            name: &str,
        ) -> Result<T, HsaError> {
            let mut c_name = Vec::with_capacity(name.len() + 1);
            c_name.extend_from_slice(name.as_bytes());
            c_name.push(0);
            // SAFETY: every call site names an HSA function whose C
            // signature is the type `T` it asks for (hsa.h).
            match unsafe { library.get::<T>(&c_name) } {
                Ok(symbol) => Ok(*symbol),
                Err(error) => Err(HsaError::MissingSymbol {
                    path: path.to_owned(),
                    symbol: name.to_owned(),
                    message: error.to_string(),
                }),
            }
        }
        Ok(Api {
            init: symbol(library, path, "hsa_init")?,
            shut_down: symbol(library, path, "hsa_shut_down")?,
            iterate_agents: symbol(library, path, "hsa_iterate_agents")?,
            agent_get_info: symbol(library, path, "hsa_agent_get_info")?,
            agent_iterate_isas: symbol(library, path, "hsa_agent_iterate_isas")?,
            isa_get_info_alt: symbol(library, path, "hsa_isa_get_info_alt")?,
            status_string: symbol(library, path, "hsa_status_string")?,
        })
    }

    /// The runtime's description of a status, if it has one.
    fn status_text(&self, status: Status) -> Option<String> {
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: hsa_status_string writes a pointer to a static string.
        let result = unsafe { (self.status_string)(status, &mut text) };
        if result != HSA_STATUS_SUCCESS || text.is_null() {
            return None;
        }
        // SAFETY: on success the pointer is a NUL-terminated static string.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    fn call_failed(&self, function: &str, status: Status) -> HsaError {
        HsaError::CallFailed {
            function: function.to_owned(),
            status,
            text: self.status_text(status),
        }
    }

    /// A string attribute of an agent (char[64] in HSA).
    fn agent_string(&self, agent: AgentHandle, attribute: u32) -> Result<String, Status> {
        let mut buffer = [0u8; NAME_BUFFER];
        // SAFETY: the buffer is larger than the 64 bytes HSA writes.
        let status = unsafe { (self.agent_get_info)(agent, attribute, buffer.as_mut_ptr().cast()) };
        if status != HSA_STATUS_SUCCESS {
            return Err(status);
        }
        Ok(c_string(&buffer))
    }

    fn agent_device_type(&self, agent: AgentHandle) -> Result<u32, HsaError> {
        // hsa_device_type_t is a C enum, 4 bytes at the start of the buffer;
        // 8 are given for safety.
        let mut device = [0u8; 8];
        // SAFETY: the attribute's value is an enum no larger than `device`.
        let status = unsafe {
            (self.agent_get_info)(agent, HSA_AGENT_INFO_DEVICE, device.as_mut_ptr().cast())
        };
        if status != HSA_STATUS_SUCCESS {
            return Err(self.call_failed("hsa_agent_get_info(HSA_AGENT_INFO_DEVICE)", status));
        }
        Ok(u32::from_ne_bytes([
            device[0], device[1], device[2], device[3],
        ]))
    }

    fn isa_name(&self, isa: IsaHandle) -> Result<String, HsaError> {
        let mut length: u32 = 0;
        // SAFETY: NAME_LENGTH writes a uint32_t.
        let status = unsafe {
            (self.isa_get_info_alt)(
                isa,
                HSA_ISA_INFO_NAME_LENGTH,
                (&mut length as *mut u32).cast(),
            )
        };
        if status != HSA_STATUS_SUCCESS {
            return Err(self.call_failed("hsa_isa_get_info_alt(HSA_ISA_INFO_NAME_LENGTH)", status));
        }
        if length > ISA_NAME_LIMIT {
            return Err(HsaError::Malformed {
                function: "hsa_isa_get_info_alt(HSA_ISA_INFO_NAME_LENGTH)".to_owned(),
                detail: format!("an ISA name length of {length} bytes"),
            });
        }
        // One more byte than announced, in case the length leaves out the NUL.
        let mut buffer = vec![0u8; length as usize + 1];
        // SAFETY: NAME writes at most NAME_LENGTH bytes.
        let status =
            unsafe { (self.isa_get_info_alt)(isa, HSA_ISA_INFO_NAME, buffer.as_mut_ptr().cast()) };
        if status != HSA_STATUS_SUCCESS {
            return Err(self.call_failed("hsa_isa_get_info_alt(HSA_ISA_INFO_NAME)", status));
        }
        Ok(c_string(&buffer))
    }
}

/// The text before the first NUL (or all of it).
fn c_string(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_owned()
}

/// Whether an ISA name names a generic target
/// (`amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-`).
fn is_generic_isa(name: &str) -> bool {
    let processor = name.split(':').next().unwrap_or_default();
    processor.ends_with("-generic")
}

/// State of the walk over agents, shared with the callbacks.
struct AgentWalk {
    api: Api,
    agents: Vec<HsaAgent>,
    error: Option<HsaError>,
}

impl AgentWalk {
    fn visit(&mut self, agent: AgentHandle) -> Result<(), HsaError> {
        if self.api.agent_device_type(agent)? != HSA_DEVICE_TYPE_GPU {
            return Ok(());
        }
        let name = self
            .api
            .agent_string(agent, HSA_AGENT_INFO_NAME)
            .map_err(|status| {
                self.api
                    .call_failed("hsa_agent_get_info(HSA_AGENT_INFO_NAME)", status)
            })?;
        // Runtimes without the AMD extension attribute answer with an error;
        // the product name is optional.
        let product = self
            .api
            .agent_string(agent, HSA_AMD_AGENT_INFO_PRODUCT_NAME)
            .ok()
            .filter(|product| !product.is_empty());
        let mut isas = IsaWalk {
            api: self.api,
            isa: None,
            error: None,
        };
        // SAFETY: the callback matches hsa_agent_iterate_isas' type and
        // `isas` outlives the call.
        let status = unsafe {
            (self.api.agent_iterate_isas)(agent, on_isa, (&mut isas as *mut IsaWalk).cast())
        };
        if let Some(error) = isas.error {
            return Err(error);
        }
        if status != HSA_STATUS_SUCCESS && status != HSA_STATUS_INFO_BREAK {
            return Err(self.api.call_failed("hsa_agent_iterate_isas", status));
        }
        let index = u32::try_from(self.agents.len()).unwrap_or(u32::MAX);
        self.agents.push(HsaAgent {
            index,
            isa: isas.isa.unwrap_or_else(|| name.clone()),
            name,
            product,
        });
        Ok(())
    }
}

/// State of the walk over one agent's ISAs.
struct IsaWalk {
    api: Api,
    isa: Option<String>,
    error: Option<HsaError>,
}

unsafe extern "C" fn on_agent(agent: AgentHandle, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `AgentWalk` given to hsa_iterate_agents, alive
    // and not otherwise borrowed during the call.
    let walk = unsafe { &mut *data.cast::<AgentWalk>() };
    match walk.visit(agent) {
        Ok(()) => HSA_STATUS_SUCCESS,
        Err(error) => {
            walk.error = Some(error);
            HSA_STATUS_ERROR
        }
    }
}

unsafe extern "C" fn on_isa(isa: IsaHandle, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `IsaWalk` given to hsa_agent_iterate_isas, alive
    // and not otherwise borrowed during the call.
    let walk = unsafe { &mut *data.cast::<IsaWalk>() };
    match walk.api.isa_name(isa) {
        Ok(name) if is_generic_isa(&name) || name.is_empty() => HSA_STATUS_SUCCESS,
        Ok(name) => {
            walk.isa = Some(name);
            HSA_STATUS_INFO_BREAK
        }
        Err(error) => {
            walk.error = Some(error);
            HSA_STATUS_ERROR
        }
    }
}

/// Loads the runtime, never to be unloaded (HSA does not survive `dlclose`).
fn load(library: Option<&Path>) -> Result<(&'static Library, PathBuf), HsaError> {
    fn open(path: &Path) -> Result<&'static Library, HsaError> {
        // SAFETY: loading runs the runtime's initialisers; that is the
        // point of the probe, which runs in its own process.
        match unsafe { Library::new(path) } {
            Ok(library) => Ok(Box::leak(Box::new(library))),
            Err(error) => Err(HsaError::Open {
                path: path.to_owned(),
                message: error.to_string(),
            }),
        }
    }

    if let Some(path) = library {
        return Ok((open(path)?, path.to_owned()));
    }

    // The dynamic loader's search path first.
    let bare = Path::new(LIBRARY_NAME);
    match open(bare) {
        Ok(library) => return Ok((library, bare.to_owned())),
        Err(HsaError::Open { message, .. })
            if message.starts_with(&format!("{LIBRARY_NAME}: cannot open shared object file")) => {}
        Err(error) => return Err(error),
    }
    let mut searched = vec![bare.to_owned()];
    let rocm_path = std::env::var_os(kpack_env::EnvVars::ROCM_PATH).filter(|path| !path.is_empty());
    let directories = rocm_path
        .map(|root| PathBuf::from(root).join("lib"))
        .into_iter()
        .chain([PathBuf::from(DEFAULT_ROCM_LIBRARY_DIR)]);
    for directory in directories {
        let path = directory.join(LIBRARY_NAME);
        if path.exists() {
            return Ok((open(&path)?, path));
        }
        searched.push(path);
    }
    Err(HsaError::NotFound { searched })
}

/// Asks HSA for its GPU agents, in this process.
///
/// Loads the runtime (never unloading it), initialises it, walks the agents
/// keeping the GPUs, and shuts it down. Meant for the probe child: a
/// runtime that hangs hangs the caller.
pub fn probe_in_process(library: Option<&Path>) -> Result<Vec<HsaAgent>, HsaError> {
    let (library, path) = load(library)?;
    let api = Api::resolve(library, &path)?;
    // SAFETY: hsa_init takes no arguments.
    let status = unsafe { (api.init)() };
    if status != HSA_STATUS_SUCCESS {
        return Err(HsaError::InitFailed {
            status,
            text: api.status_text(status),
        });
    }
    let mut walk = AgentWalk {
        api,
        agents: Vec::new(),
        error: None,
    };
    // SAFETY: the callback matches hsa_iterate_agents' type and `walk`
    // outlives the call.
    let status = unsafe { (api.iterate_agents)(on_agent, (&mut walk as *mut AgentWalk).cast()) };
    let result = match walk.error {
        Some(error) => Err(error),
        None if status != HSA_STATUS_SUCCESS && status != HSA_STATUS_INFO_BREAK => {
            Err(api.call_failed("hsa_iterate_agents", status))
        }
        None => Ok(walk.agents),
    };
    // SAFETY: balances the successful hsa_init above; its status does not
    // change the answer.
    let _ = unsafe { (api.shut_down)() };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_isa_names_are_recognised_with_and_without_prefix() {
        assert!(is_generic_isa(
            "amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-"
        ));
        assert!(is_generic_isa("gfx11-generic"));
        assert!(!is_generic_isa("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"));
        assert!(!is_generic_isa("gfx1100"));
    }

    #[test]
    fn c_string_stops_at_nul_and_tolerates_none() {
        assert_eq!(c_string(b"gfx90a\0garbage"), "gfx90a");
        assert_eq!(c_string(b"gfx1100"), "gfx1100");
        assert_eq!(c_string(b"\0"), "");
    }
}
