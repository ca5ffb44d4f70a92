//! The canonical formatter (`warden fmt`).
