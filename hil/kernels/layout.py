"""Layout constants of the kernel model arrays, the one place they are defined.

The kernels and everything that fills or reads the arrays (hil.model.assembly, hil.dynamics,
hil.devices) use these names instead of bare indices. Plain module-level integers: numba
freezes them as compile-time constants.
"""

# KernelModel.dims: the model's sizes
DIM_NB = 0        # bodies (= joints)
DIM_NETA = 1      # modal coordinates of all bodies
DIM_NMOT = 2      # rotor coordinates (Spong elastic joints)
DIM_NM = 3        # largest number of modes of one body
DIM_NQ = 4        # generalized coordinates: joints, modes, rotors
DIM_NS = 5        # output stations
N_DIMS = 6

# KernelModel.drive, per joint: how its coordinate moves in the kernel (the model's
# "torque" joints start as JOINT_TORQUE_DRIVEN, its "prescribed" joints as JOINT_PRESCRIBED)
JOINT_TORQUE_DRIVEN = 0   # free under the drive (or Spong spring) torque
JOINT_PRESCRIBED = 1      # the profile's angle, rate and acceleration (a braked stiff joint: held constant)
JOINT_ROTOR_HELD = 2      # a Spong joint whose holding brake holds the rotor at rest; the link moves on its spring

# columns of KernelModel.jpar: per-joint friction smoothing, Stribeck, the kinetic torque and ramp width
# of a slipping holding brake (hil.devices.drives), backlash (one array rather than one field each: every
# field of the model tuple costs each kernel call)
JP_COUL_VS, JP_STRIBECK, JP_STRIB_VS, JP_BRAKE, JP_BRAKE_VS, JP_BACKLASH = range(6)
N_JP = 6

# integrators (hil.kernels.integrate)
METHOD_RK4 = 0
METHOD_IMEX = 1
METHOD_EULER = 2
METHOD_FITTED = 3      # the fitted implicit midpoint (hil.kernels.fitted_midpoint)

# KernelModel.fitted[i, k]: the fitted midpoint scheme's n_m x n_m blocks of body k for the plan's substep h
# (hil.model.midpoint_fit; zero until a plan uses the scheme)
FIT_B = 0     # B: the modes' midpoint position q_e + h^2 B a
FIT_C = 1     # C = h^2 K B + h/2 D (symmetrised): the implicit operator added to the modal mass
N_FIT = 2

# KernelModel.prof_kind: the law of a prescribed joint (hil.kernels.profiles)
MOTION_CONSTANT = 0
MOTION_SPINUP = 1
MOTION_CYCLOIDAL = 2
MOTION_TABLE = 3

