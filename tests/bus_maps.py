"""Bus maps the tests need that no preset ships: float32 torque commands, so that a NaN or any
magnitude can be sent (the shipped maps carry int16 torques only)."""
from __future__ import annotations

JOINTS = ("base_yaw", "shoulder_pitch", "elbow")
LIMITS_NM = (240.0, 360.0, 90.0)            # ELLA's drives' peak torques


def float_commands(*, crc: str = "crc8", crc_byte: int = 15, limits: bool | tuple = True) -> str:
    """The cmd_torque message (id 0x100, 16 bytes): three float32 torques [N m], with their range (the
    drives' peaks, or the `limits` given per joint) or without one, a rolling counter and an application CRC."""
    ranges = LIMITS_NM if limits is True else limits
    signals = "".join(
        f'  [[message.signal]]\n  name = "tau_{joint}"\n  type = "float32"\n  start_bit = {32 * k}\n'
        f'  unit = "N m"\n' + (f"  min = -{limit:g}\n  max = {limit:g}\n" if limits else "")
        for k, (joint, limit) in enumerate(zip(JOINTS, ranges or LIMITS_NM)))
    return (f'[[message]]\nname = "cmd_torque"\nid = 0x100\ndirection = "to_plant"\ndlc = 16\n'
            f'counter = "command_counter"\ncrc = "{crc}"\ncrc_byte = {crc_byte}\n' + signals +
            '  [[message.signal]]\n  name = "command_counter"\n  type = "uint8"\n  start_bit = 96\n')


def float_map(*, crc: str = "crc8", crc_byte: int = 15, limits: bool | tuple = True) -> str:
    """A CAN FD map: float_commands and a sensors message (id 0x110) with the three encoders [counts],
    the status word and the cycle counter."""
    encoders = "".join(f'  [[message.signal]]\n  name = "enc_{joint}"\n  type = "int32"\n  start_bit = {32 * k}\n'
                       for k, joint in enumerate(JOINTS))
    return ('[bus]\nkind = "canfd"\nbitrate_bps = 1000000\ndata_bitrate_bps = 5000000\ncycle_s = 0.001\n\n'
            + float_commands(crc=crc, crc_byte=crc_byte, limits=limits) +
            f'\n[[message]]\nname = "sensors"\nid = 0x110\ndirection = "to_firmware"\ndlc = 16\n'
            f'counter = "cycle"\ncrc = "{crc}"\ncrc_byte = {crc_byte}\n' + encoders +
            '  [[message.signal]]\n  name = "status"\n  type = "uint8"\n  start_bit = 96\n'
            '  [[message.signal]]\n  name = "cycle"\n  type = "uint8"\n  start_bit = 104\n')
