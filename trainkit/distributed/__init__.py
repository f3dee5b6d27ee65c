"""What the strategies share across processes: control messages, gathering, rendezvous,
samplers, wrappers and the FSDP helpers."""
