"""kskill: makes PyTorch modules faster by writing, verifying and tuning GPU kernels in a closed
loop whose decisions come from an explicit knowledge graph of expert skills."""
