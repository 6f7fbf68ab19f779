"""The CiA 402 power drive system state machine: controlword in, statusword out.

States and their statusword bits (bit 0 ready to switch on, 1 switched on, 2 operation enabled,
3 fault, 4 voltage enabled, 5 quick stop (0: a quick stop is active), 6 switch on disabled):

    state                   statusword (& 0x6F)   torque
    Not ready to switch on  0x00                  off (passed at power-on)
    Switch on disabled      0x40                  off
    Ready to switch on      0x21                  off
    Switched on             0x23                  off
    Operation enabled       0x27                  the target torque
    Quick stop active       0x07                  off (the drive stops: the emulator's safe state)
    Fault reaction active   0x0F                  off (one cycle, then Fault)
    Fault                   0x08                  off

Bit 4 (voltage enabled) is set from Ready to switch on to Quick stop active, bit 9 (remote) always
(the drive follows the controlword), bit 11 (internal limit active) while the target torque is
clipped to the maximum torque. Controlword commands (bits 7, 3, 2, 1, 0): shutdown 0xxx x110,
switch on 0xxx 0111 (also disable operation), enable operation 0xxx 1111, disable voltage 0xxx
xx0x, quick stop 0xxx x01x, fault reset a 0 -> 1 edge of bit 7. Transitions (CiA 402 numbering):
2 Switch on disabled -> Ready (shutdown); 3 Ready -> Switched on (switch on; with enable operation
3 and 4 at once); 4 Switched on -> Operation enabled; 5 Operation enabled -> Switched on
(disable operation); 6, 8 -> Ready (shutdown); 7, 9, 10, 12 -> Switch on disabled (disable
voltage, or quick stop from Ready / Switched on); 11 Operation enabled -> Quick stop active;
13 any -> Fault reaction active (a fault); 14 -> Fault (when the reaction is done, the next cycle);
15 Fault -> Switch on disabled (fault reset, refused while the fault's cause persists); 16 Quick
stop active -> Operation enabled (enable operation, quick stop option code 5..8). Quick stop
option code 0x605A: 2 (default) leaves Quick stop active for Switch on disabled at the next cycle,
6 stays in Quick stop active.
"""
from __future__ import annotations

NOT_READY, SWITCH_ON_DISABLED, READY_TO_SWITCH_ON, SWITCHED_ON = 0, 1, 2, 3
OPERATION_ENABLED, QUICK_STOP_ACTIVE, FAULT_REACTION_ACTIVE, FAULT = 4, 5, 6, 7
STATE_NAMES = ("not ready to switch on", "switch on disabled", "ready to switch on", "switched on",
               "operation enabled", "quick stop active", "fault reaction active", "fault")
VOLTAGE_ENABLED, REMOTE, INTERNAL_LIMIT = 0x0010, 0x0200, 0x0800
STATUS = (0x0000, 0x0040, 0x0021 | VOLTAGE_ENABLED, 0x0023 | VOLTAGE_ENABLED, 0x0027 | VOLTAGE_ENABLED,
          0x0007 | VOLTAGE_ENABLED, 0x000F, 0x0008)
# controlword commands
SHUTDOWN, SWITCH_ON, ENABLE_OPERATION, DISABLE_VOLTAGE, QUICK_STOP = range(5)
FAULT_RESET_BIT = 0x80
QUICK_STOP_OPTIONS = (2, 6)        # supported values of 0x605A
_NEXT = {   # (state, command) -> state; a command not listed leaves the state as it is
    (SWITCH_ON_DISABLED, SHUTDOWN): READY_TO_SWITCH_ON,
    (READY_TO_SWITCH_ON, SWITCH_ON): SWITCHED_ON, (READY_TO_SWITCH_ON, ENABLE_OPERATION): OPERATION_ENABLED,
    (READY_TO_SWITCH_ON, DISABLE_VOLTAGE): SWITCH_ON_DISABLED, (READY_TO_SWITCH_ON, QUICK_STOP): SWITCH_ON_DISABLED,
    (SWITCHED_ON, ENABLE_OPERATION): OPERATION_ENABLED, (SWITCHED_ON, SHUTDOWN): READY_TO_SWITCH_ON,
    (SWITCHED_ON, DISABLE_VOLTAGE): SWITCH_ON_DISABLED, (SWITCHED_ON, QUICK_STOP): SWITCH_ON_DISABLED,
    (OPERATION_ENABLED, SWITCH_ON): SWITCHED_ON, (OPERATION_ENABLED, SHUTDOWN): READY_TO_SWITCH_ON,
    (OPERATION_ENABLED, DISABLE_VOLTAGE): SWITCH_ON_DISABLED, (OPERATION_ENABLED, QUICK_STOP): QUICK_STOP_ACTIVE,
    (QUICK_STOP_ACTIVE, DISABLE_VOLTAGE): SWITCH_ON_DISABLED,
}


def command_of(controlword: int) -> int:
    """The device control command of a controlword (bit 7, fault reset, is an edge: see PowerStateMachine)."""
    if not controlword & 0x02:
        return DISABLE_VOLTAGE
    if not controlword & 0x04:
        return QUICK_STOP
    if not controlword & 0x01:
        return SHUTDOWN
    return ENABLE_OPERATION if controlword & 0x08 else SWITCH_ON


class PowerStateMachine:
    """One drive's CiA 402 state; ``enabled`` is True exactly in Operation enabled."""

    def __init__(self) -> None:
        self.state = NOT_READY
        self.controlword = 0
        self.quick_stop_option = 2
        self.cause = False          # a fault's cause persists (a fault reset is refused meanwhile)
        self.limited = False        # the target torque is clipped (statusword bit 11)
        self.transitions = 0
        self.refused_resets = 0
        self.power_on()

    @property
    def enabled(self) -> bool:
        return self.state == OPERATION_ENABLED

    @property
    def transient(self) -> bool:
        """The state moves on by itself at the next tick()."""
        return self.state == FAULT_REACTION_ACTIVE or (self.state == QUICK_STOP_ACTIVE and self.quick_stop_option < 5)

    def power_on(self) -> None:
        """Transitions 0 and 1: initialisation done, Switch on disabled (or Fault while a cause persists)."""
        self.controlword = 0
        self._go(FAULT if self.cause else SWITCH_ON_DISABLED)

    def statusword(self) -> int:
        return STATUS[self.state] | REMOTE | (INTERNAL_LIMIT if self.limited else 0)

    def write(self, controlword: int) -> bool:
        """Take a controlword; True if the state changed."""
        previous, self.controlword = self.controlword, controlword
        state = self.state
        if state in (FAULT, FAULT_REACTION_ACTIVE):
            if state == FAULT and controlword & FAULT_RESET_BIT and not previous & FAULT_RESET_BIT:
                if self.cause:
                    self.refused_resets += 1
                    return False
                return self._go(SWITCH_ON_DISABLED)
            return False
        command = command_of(controlword)
        if state == QUICK_STOP_ACTIVE and command == ENABLE_OPERATION and self.quick_stop_option >= 5:
            return self._go(OPERATION_ENABLED)
        nxt = _NEXT.get((state, command))
        return nxt is not None and self._go(nxt)

    def fault(self) -> bool:
        """Transition 13: a fault (its cause persists until cleared()); True if the drive was not in fault yet."""
        self.cause = True
        if self.state in (FAULT, FAULT_REACTION_ACTIVE):
            return False
        return self._go(FAULT_REACTION_ACTIVE)

    def cleared(self) -> None:
        """The fault's cause is gone: a fault reset will now be taken."""
        self.cause = False

    def tick(self) -> bool:
        """Once per cycle while transient: transitions 14 (fault reaction done) and 12 (quick stop done)."""
        if self.state == FAULT_REACTION_ACTIVE:
            return self._go(FAULT)
        if self.state == QUICK_STOP_ACTIVE and self.quick_stop_option < 5:
            return self._go(SWITCH_ON_DISABLED)
        return False

    def _go(self, state: int) -> bool:
        self.state = state
        self.transitions += 1
        return True

    @property
    def name(self) -> str:
        return STATE_NAMES[self.state]
