//! Input refusals: which command of which input the server's host refused,
//! and why, as the Refused frame tells the client.

/// Why the server refused one command of a client's input. The wire code
/// is stable; codes this version does not know decode as [`Other`](Self::Other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InputRefusal {
    /// 1: the command names another entity than the client's own (the
    /// whole input it came in is refused).
    NotYours,
    /// 2: a command kind the server does not accept from clients (for
    /// `lockgrid serve`, anything but a Move).
    NotAllowed,
    /// 3: farther from the last accepted position than the distance
    /// allowance holds.
    TooFast,
    /// 4: more moves than the move allowance holds.
    TooManyMoves,
    /// 5: a speed below zero or above the max speed.
    BadSpeed,
    /// 6: a position outside the world.
    OutOfBounds,
    /// 7: a reason of the host's own game rules.
    Refused,
    /// A code this version does not know.
    Other(u8),
}

impl InputRefusal {
    /// The wire code.
    pub const fn code(self) -> u8 {
        match self {
            InputRefusal::NotYours => 1,
            InputRefusal::NotAllowed => 2,
            InputRefusal::TooFast => 3,
            InputRefusal::TooManyMoves => 4,
            InputRefusal::BadSpeed => 5,
            InputRefusal::OutOfBounds => 6,
            InputRefusal::Refused => 7,
            InputRefusal::Other(c) => c,
        }
    }

    /// The reason of a wire code.
    pub const fn from_code(code: u8) -> Self {
        match code {
            1 => InputRefusal::NotYours,
            2 => InputRefusal::NotAllowed,
            3 => InputRefusal::TooFast,
            4 => InputRefusal::TooManyMoves,
            5 => InputRefusal::BadSpeed,
            6 => InputRefusal::OutOfBounds,
            7 => InputRefusal::Refused,
            c => InputRefusal::Other(c),
        }
    }
}

/// One refused command: the input it came in (by input sequence number)
/// and its index among that input's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusedInput {
    /// The input's sequence number (see the Input frame).
    pub seq: u64,
    /// The command's index in the input, from 0.
    pub index: u8,
    /// Why.
    pub reason: InputRefusal,
}

/// Most refusals one Refused frame carries.
pub const MAX_REFUSALS_PER_FRAME: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in 0..=255u8 {
            assert_eq!(InputRefusal::from_code(c).code(), c);
        }
    }
}
