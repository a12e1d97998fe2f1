//! lockgrid-protocol: the sans-IO wire layer between a lockgrid server and its clients.
//!
//! It contains no networking code and reads no clock: bytes in, bytes out,
//! and every time-dependent call takes `now`.
#![no_std]
#![forbid(unsafe_code)]
