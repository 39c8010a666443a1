print("geoconsentd: not yet")
