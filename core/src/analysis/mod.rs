//! Analyses: overlap, exposed communication, idle time, steps, sync stalls, SM occupancy.
