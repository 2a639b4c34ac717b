"""Records: op-table rows to op, step, program and host records under the device's roofs; floors,
rankings, throughput, the communication roofline and measured (counter) records."""
