"""Sources: what a job's input is (``source``), and the parts it gives, each read as documents (``part``)."""
