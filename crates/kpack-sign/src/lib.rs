//! minisign keys and signatures, the one home of signing for every tool:
//! making key pairs (`keygen`), loading secret keys as an operator's keys
//! come and signing data or files with them (`secret`), loading public
//! keys and verifying signatures (`public`). What a signature's trusted
//! comment says is the caller's: a repository's root, a packed archive.
//! Files interoperate with the stock `minisign` tool.
#![forbid(unsafe_code)]

mod keygen;
mod public;
mod secret;

pub use keygen::{keygen, KeygenError};
pub use public::{BadSignature, PublicKey, PublicKeyError};
pub use secret::{KeyError, KeyProblem, SecretKey, SigningError};
