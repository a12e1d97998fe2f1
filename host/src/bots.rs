//! Protocol clients that load a server and check their views.
