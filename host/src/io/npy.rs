//! .npy output for Python users.
