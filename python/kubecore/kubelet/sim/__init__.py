"""The simulated ("hollow") runtime: `runtime.SimRuntime` (CRI without processes, with its pod
IPAM) and `behaviour` (the annotations that steer it, and `SimHandlers`, its probe and hook answers)."""
