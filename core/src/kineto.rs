//! Kineto (torch.profiler) Chrome JSON import.
