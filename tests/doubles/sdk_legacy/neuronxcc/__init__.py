"""Contract double of neuronx-cc on the course's SDK 2.26 line: only `neuronxcc.nki` exists."""
