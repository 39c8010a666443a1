print("geoconsentctl: not yet")
