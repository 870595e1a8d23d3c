"""`xfrbench link test`: build a testbed, measure its link with ping, a UDP flood and
iperf3, and set it against the model.
"""
