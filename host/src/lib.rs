//! lockgrid-host: the std layer around the kernel and protocol.
#![forbid(unsafe_code)]
