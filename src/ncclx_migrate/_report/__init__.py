"""``ncclx report``: add up many repositories' ``ncclx migrate`` reports and many jobs' ``ncclx
doctor`` reports into one roll-up (terminal, JSON, one HTML page), one input at a time."""
