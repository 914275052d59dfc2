//! SEG-Y rev 1/2 reading and writing (see the io issue).
